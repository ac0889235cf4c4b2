"""JSON shapes of catalog records (runs, shares) as docs/API.md defines them; no computation.

A run's shape is defined once, in explorer.views.links (pages and the offline report use it too)."""

from __future__ import annotations

from api.schemas import ShareJson
from explorer.runs.store import ShareRecord
from explorer.views.links import run_json, run_links

__all__ = ["run_json", "run_links", "share_json"]


def share_json(share: ShareRecord) -> ShareJson:
    return {"token": share.token, "run_id": share.run_id, "url": f"/s/{share.token}",
            "created_at": share.created_at, "revoked": share.revoked}
