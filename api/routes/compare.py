"""Runs compared op by op and kernel by kernel: the page and its twin."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.deps import StateDep, parse_csv, ready_run
from api.state import AppState
from api.templating import render_page
from explorer.model.shapes import CompareResult
from explorer.runs.run import Run
from explorer.views.compare import build_compare_page, check_compare_ids, compute_run_compare

router = APIRouter(tags=["analysis"])


def compared_runs(state: AppState, runs: str) -> list[Run]:
    """`runs=a,b`: two to eight distinct ready runs (400 otherwise, 404 for an unknown id, 409 not ready)."""
    ids = parse_csv(runs, "runs") or []
    check_compare_ids(ids)
    return [ready_run(state, state.store.get(i)) for i in ids]


@router.get("/api/compare")
def compare(state: StateDep, runs: str, baseline: str | None = None) -> CompareResult:
    """Two to eight runs op by op and kernel by kernel against the baseline: `baseline=` when given, else
    the first run tagged baseline/before, else the first run (the result names it and why, and lists it
    first)."""
    return compute_run_compare(compared_runs(state, runs), baseline)


@router.get("/compare", response_class=HTMLResponse, include_in_schema=False)
def compare_page(request: Request, state: StateDep, runs: str = "", baseline: str | None = None) -> HTMLResponse:
    page = build_compare_page(compared_runs(state, runs), baseline)
    return render_page(request, state, "compare.html", page, plotly=True)
