"""Liveness and version, outside /api: `/-/health` stays open even when a token is required."""

from __future__ import annotations

from fastapi import APIRouter

from api.schemas import Health, Version
from explorer import __version__

router = APIRouter(prefix="/-", tags=["meta"])


@router.get("/health")
def health() -> Health:
    return {"status": "ok"}


@router.get("/version")
def version() -> Version:
    return {"version": __version__, "api": 1}
