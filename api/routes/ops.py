"""The op table: the page and its JSON twin, one query (OpsQueryDep)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.deps import OpsQueryDep, PageRunDep, RunDep, StateDep
from api.templating import render_page
from explorer.model.shapes import OpsResult
from explorer.model.source_links import SourceLinker
from explorer.views.ops import build_ops_page, compute_run_ops

router = APIRouter(tags=["analysis"])


@router.get("/api/runs/{run_id}/ops")
def ops(run: RunDep, state: StateDep, query: OpsQueryDep) -> OpsResult:
    """The op table (like key_averages()) in one view: operators (default), python (with_stack frames)
    or all. Sorted by self device time, or self CPU without a device, unless `sort` says otherwise;
    start_ns/end_ns (relative) keep ops starting in that range; by_module groups by nn.Module path;
    rank=0,3 keeps those ranks' slices."""
    return compute_run_ops(run, query, SourceLinker.from_settings(state.settings))


@router.get("/runs/{run_id}/ops", response_class=HTMLResponse, include_in_schema=False)
def ops_page(request: Request, run: PageRunDep, state: StateDep, query: OpsQueryDep) -> HTMLResponse:
    page = build_ops_page(run, query, SourceLinker.from_settings(state.settings))
    return render_page(request, state, "ops.html", page, active="ops", plotly=True)
