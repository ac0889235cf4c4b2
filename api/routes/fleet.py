"""Fleet queries: GET /api/fleet/ops (one op's or kernel's time across the last N runs) and its page /fleet."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from api.deps import StateDep
from api.templating import render_page
from explorer.model.shapes import FleetResult
from explorer.views.check import DEFAULT_MAX_REGRESSION
from explorer.views.fleet import (
    DEFAULT_LAST,
    MAX_LAST,
    MAX_NAME_CHARS,
    FleetQuery,
    build_fleet_page,
    compute_fleet,
)

router = APIRouter(tags=["fleet"])


def fleet_query(name: Annotated[str, Query(max_length=MAX_NAME_CHARS, description="op or kernel name, exact; "
                                                 "empty: the most expensive one")] = "",
                kind: Annotated[str, Query(description="op | kernel")] = "op",
                tag: Annotated[str, Query(max_length=200, description="only runs with this tag")] = "",
                run_name: Annotated[str, Query(max_length=MAX_NAME_CHARS,
                                               description="only runs whose name contains this")] = "",
                last: Annotated[int, Query(ge=1, le=MAX_LAST, description="the last N matching ready runs")] = DEFAULT_LAST,
                max_regression: Annotated[str, Query(max_length=20, description="5% or the fraction 0.05")]
                = DEFAULT_MAX_REGRESSION) -> FleetQuery:
    return FleetQuery(name, kind, tag, run_name, last, max_regression)


FleetQueryDep = Annotated[FleetQuery, Depends(fleet_query)]


@router.get("/api/fleet/ops")
def fleet_ops(state: StateDep, q: FleetQueryDep) -> FleetResult:
    """One op's (kind=op: the op table's device total) or kernel's (kind=kernel) time in each of the last N
    ready runs matching tag / run_name, oldest first, with the change vs the previous run and vs the median
    of the previous runs; `regression` where it grew by more than max_regression over that median."""
    return compute_fleet(state.store, q, state.settings.sql_timeout_s)


@router.get("/fleet", response_class=HTMLResponse, include_in_schema=False)
def fleet_page(request: Request, state: StateDep, q: FleetQueryDep) -> HTMLResponse:
    page = build_fleet_page(state.store, q, state.settings.sql_timeout_s)
    return render_page(request, state, "fleet.html", page, plotly=True)
