"""A run as the API's `Run` object and its links (docs/API.md); pages, twins and the report share it."""

from __future__ import annotations

from explorer.model.shapes import (
    RunJson,
    RunLinks,
)
from explorer.store.catalog.catalog import RunRecord


def run_links(run_id: str) -> RunLinks:
    api = f"/api/runs/{run_id}"
    return {"self": api, "page": f"/runs/{run_id}", "tracks": f"{api}/tracks", "timeline": f"{api}/timeline",
            "ops": f"{api}/ops", "breakdown": f"{api}/breakdown", "search": f"{api}/search", "sql": f"{api}/sql"}


def run_json(rec: RunRecord) -> RunJson:
    """A run as the API's `Run` object (docs/API.md; tests pin it equal to GET /api/runs/{id})."""
    return {"id": rec.id, "name": rec.name, "status": rec.status, "progress": rec.progress,
            "message": rec.message, "tags": rec.tags, "created_at": rec.created_at, "sha256": rec.sha256,
            "source": rec.source, "summary": rec.summary.stored(), "links": run_links(rec.id)}
