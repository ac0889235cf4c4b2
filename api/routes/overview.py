"""A run's overview page and its twin, the lane breakdown."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import HTMLResponse

from api.deps import PageRunDep, RankFilter, RunDep, StateDep
from api.responses import FastJSONResponse, fast_json
from api.templating import render_page
from explorer.model.shapes import Breakdown
from explorer.runs.run import Run
from explorer.views.overview import build_overview, compute_run_breakdown

router = APIRouter(tags=["analysis"])


def warm_timeline(run: Run, background: BackgroundTasks) -> None:
    """Build the run's timeline index after this response, so the timeline's first window is fast (the overview
    is usually opened before the timeline)."""
    background.add_task(run.timeline_index)


@router.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
def overview_page(request: Request, run: PageRunDep, state: StateDep, background: BackgroundTasks,
                  rank: RankFilter = None) -> HTMLResponse:
    warm_timeline(run, background)
    return render_page(request, state, "overview.html", build_overview(run, rank or ""), active="overview",
                       plotly=True)


@router.get("/api/runs/{run_id}/breakdown", response_class=FastJSONResponse, response_model=Breakdown)
def breakdown(run: RunDep, rank: RankFilter = None) -> FastJSONResponse:
    """Busy/idle per lane and device, and the gaps between device executions with a cause guess; rank=0,3
    keeps those ranks' slices (idle against the run's span)."""
    return fast_json(compute_run_breakdown(run, rank or ""))
