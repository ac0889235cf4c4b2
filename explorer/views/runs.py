"""The runs list (`/`, twin `/api/runs`) and the page of a run that is not ready."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from explorer.model.shapes import (
    RunJson,
    RunList,
)
from explorer.store.runs import RunStore
from explorer.views.links import run_json

RUNS_PAGE_LIMIT = 1000


@dataclass
class RunsPage:
    """`/` and its twin `/api/runs`."""

    runs: list[RunJson]
    total: int
    twin: str = "/api/runs"


@dataclass
class NotReadyPage:
    """Any run page of a run still ingesting, or failed; twin `/api/runs/{id}`."""

    run: RunJson
    twin: str = ""


def compute_run_list(store: RunStore, name: str | None = None, tag: str | None = None, status: str | None = None,
                     limit: int = 50, offset: int = 0) -> RunList:
    """The `/api/runs` object: runs newest first, filtered by name substring, tag and status."""
    records, total = store.catalog.list(name=name, tag=tag, status=status, limit=limit, offset=offset)
    return {"runs": [run_json(r) for r in records], "total": total, "limit": limit, "offset": offset}


def build_runs_page(store: RunStore, name: str = "", tag: str = "") -> RunsPage:
    data = compute_run_list(store, name=name or None, tag=tag or None, limit=RUNS_PAGE_LIMIT)
    q = urlencode({k: v for k, v in (("name", name), ("tag", tag)) if v})
    return RunsPage(data["runs"], data["total"], "/api/runs" + (f"?{q}" if q else ""))
