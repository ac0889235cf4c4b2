"""Response shapes of the API's own records (uploads, share links, health): TypedDicts that FastAPI
documents in /openapi.json, like the analysis shapes in explorer.model.shapes. No computation."""

from __future__ import annotations

from pydantic import with_config
from typing_extensions import TypedDict

from explorer.model.shapes import STRICT, RunJson


@with_config(STRICT)
class UploadAccepted(TypedDict):
    """POST /api/runs: the new run (queued) or the existing run with the same content (`duplicate_of`)."""

    id: str
    status: str
    status_url: str
    duplicate_of: str | None


@with_config(STRICT)
class ShareJson(TypedDict):
    token: str
    run_id: str
    url: str
    created_at: float
    revoked: bool


@with_config(STRICT)
class ShareList(TypedDict):
    shares: list[ShareJson]


@with_config(STRICT)
class SharedRun(TypedDict):
    """GET /api/s/{token}: the run a share link opens."""

    run_id: str
    run: RunJson


@with_config(STRICT)
class Health(TypedDict):
    status: str


@with_config(STRICT)
class Version(TypedDict):
    version: str
    api: int
