"""The advisor: a run's findings ranked by expected saving, as JSON and as the findings page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.deps import AnyRunDep, RunDep, StateDep
from api.routes.pages import _not_ready, _render
from explorer.model.advice_shapes import AdviceResult
from explorer.views.advice import build_advice_page

router = APIRouter(prefix="/api/runs/{run_id}", tags=["analysis"])
pages = APIRouter(include_in_schema=False)


@router.get("/advice")
def advice(run: RunDep, state: StateDep) -> AdviceResult:
    """Every finding of the advisor's rules, largest expected saving first: symptom with its numbers, evidence
    links, the fix, the saving with its formula, confidence and effort (docs/advice.md)."""
    return state.advice(run.id)


@pages.get("/runs/{run_id}/advice", response_class=HTMLResponse)
def advice_page(request: Request, run: AnyRunDep, state: StateDep) -> HTMLResponse:
    if run.status != "ready":
        return _not_ready(request, state, run)
    page = build_advice_page(state.store, run.id, state.advice(run.id))
    return _render(request, state, "advice.html", page, active="advice")
