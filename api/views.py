"""JSON shapes of catalog records (runs, shares) as docs/API.md defines them; no computation."""

from __future__ import annotations

from typing import Any

from explorer.store.catalog import RunRecord, ShareRecord


def run_links(run_id: str) -> dict[str, str]:
    api = f"/api/runs/{run_id}"
    return {"self": api, "page": f"/runs/{run_id}", "tracks": f"{api}/tracks", "timeline": f"{api}/timeline",
            "ops": f"{api}/ops", "breakdown": f"{api}/breakdown", "search": f"{api}/search", "sql": f"{api}/sql"}


def run_json(rec: RunRecord) -> dict[str, Any]:
    return {"id": rec.id, "name": rec.name, "status": rec.status, "progress": rec.progress,
            "message": rec.message, "tags": rec.tags, "created_at": rec.created_at, "sha256": rec.sha256,
            "source": rec.source, "summary": rec.summary, "links": run_links(rec.id)}


def share_json(share: ShareRecord) -> dict[str, Any]:
    return {"token": share.token, "run_id": share.run_id, "url": f"/s/{share.token}",
            "created_at": share.created_at, "revoked": share.revoked}
