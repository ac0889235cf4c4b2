"""Liveness and version, outside /api: `/-/health` stays open even when a token is required."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from explorer import __version__

router = APIRouter(prefix="/-", tags=["meta"])


@router.get("/health")
def health() -> dict[str, Any]:
    return {"status": "ok"}


@router.get("/version")
def version() -> dict[str, Any]:
    return {"version": __version__, "api": 1}
