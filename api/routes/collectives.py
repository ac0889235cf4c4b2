"""Collectives matched across ranks: the table (by total wait) and the links the timeline overlay draws."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from api.deps import PageRunDep, RunDep, StateDep
from api.templating import render_page
from explorer.model.shapes import CollectiveLinks, CollectivesResult
from explorer.views.collectives import COLLECTIVES_SORT as DEFAULT_SORT
from explorer.views.collectives import build_collectives_page, collective_links_json, collectives_json

router = APIRouter(tags=["analysis"])
Limit = Annotated[int | None, Query(ge=0, le=100000)]


@router.get("/api/runs/{run_id}/collectives")
def collectives(run: RunDep, sort: str = DEFAULT_SORT, limit: Limit = None) -> CollectivesResult:
    """Collectives matched across ranks by process group and sequence number (else by order per name):
    per rank arrival/start/end/wait ns (relative to the run origin), total wait, last arriver, transfer
    ns, size, algbw / busbw (GB/s); plus the mismatches that were not paired."""
    return collectives_json(run.collectives(), sort=sort, limit=limit)


@router.get("/api/runs/{run_id}/collectives/links")
def collective_links(run: RunDep, start_ns: Annotated[int, Query(ge=0)] = 0,
                     end_ns: Annotated[int, Query(gt=0)] = 2**62) -> CollectiveLinks:
    """The matched collectives overlapping [start_ns, end_ns) (relative ns), each as its ranks' execution
    slice ids (rank order): what the timeline's collectives overlay connects."""
    return collective_links_json(run.collectives(), start_ns, end_ns)


@router.get("/runs/{run_id}/collectives", response_class=HTMLResponse, include_in_schema=False)
def collectives_page(request: Request, run: PageRunDep, state: StateDep, sort: str = DEFAULT_SORT,
                     limit: Limit = None) -> HTMLResponse:
    page = build_collectives_page(run, sort=sort, limit=limit)
    return render_page(request, state, "collectives.html", page, active="collectives")
