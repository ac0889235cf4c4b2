"""The advisor: a run's findings ranked by expected saving, as JSON and as the findings page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.deps import PageRunDep, RunDep, StateDep
from api.templating import render_page
from explorer.model.advice_shapes import AdviceResult
from explorer.views.advice import build_advice_page, run_advice

router = APIRouter(prefix="/api/runs/{run_id}", tags=["analysis"])
pages = APIRouter(include_in_schema=False)


@router.get("/advice")
def advice(run: RunDep) -> AdviceResult:
    """Every finding of the advisor's rules, largest expected saving first: symptom with its numbers, evidence
    links, the fix, the saving with its formula, confidence and effort (docs/advice.md)."""
    return run_advice(run)


@pages.get("/runs/{run_id}/advice", response_class=HTMLResponse)
def advice_page(request: Request, run: PageRunDep, state: StateDep) -> HTMLResponse:
    page = build_advice_page(run)
    return render_page(request, state, "advice.html", page, active="advice")
