"""The steps: one row per step and where its time went; the page and its twin."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from api.deps import PageRunDep, RunDep, StateDep
from api.templating import render_page
from explorer.model.shapes import StepsResult
from explorer.views.steps import DEFAULT_STEP_ANNOTATION, MAX_ANNOTATION_CHARS, build_steps_page

router = APIRouter(tags=["analysis"])
Annotation = Annotated[str, Query(max_length=MAX_ANNOTATION_CHARS, description="the step ranges' name prefix")]


@router.get("/api/runs/{run_id}/steps")
def steps(run: RunDep, annotation: Annotation = DEFAULT_STEP_ANNOTATION) -> StepsResult:
    """One row per step (host slices whose name starts with `annotation`, default ProfilerStep#): step time,
    device busy, compute / communication / memcpy / memset / other / idle ns, and the slowest step."""
    return run.steps(annotation)


@router.get("/runs/{run_id}/steps", response_class=HTMLResponse, include_in_schema=False)
def steps_page(request: Request, run: PageRunDep, state: StateDep,
               annotation: Annotation = DEFAULT_STEP_ANNOTATION) -> HTMLResponse:
    return render_page(request, state, "steps.html", build_steps_page(run, annotation), active="steps", plotly=True)
