"""Ranks of a multi-rank run: the per-rank summary with its stragglers, and one rank against another."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from api.deps import PageRunDep, RunDep, StateDep
from api.templating import render_page
from explorer.model.shapes import RankCompareResult, RanksResult
from explorer.views.ranks import build_rank_compare_page, build_ranks_page, compute_run_rank_compare

router = APIRouter(prefix="/api/runs/{run_id}", tags=["analysis"])
pages = APIRouter(include_in_schema=False)

RankNumber = Annotated[int | None, Query(ge=0, le=10**9, description="a rank of the run")]


@router.get("/ranks")
def ranks(run: RunDep) -> RanksResult:
    """One row per rank: steps, step time, compute / communication (exposed, hidden) / memcpy / idle ns
    in its window, busy %, lateness to collectives, and whether it is a straggler with the evidence."""
    return run.ranks()


@router.get("/ranks/compare")
def rank_compare(run: RunDep, a: RankNumber = None, b: RankNumber = None) -> RankCompareResult:
    """Rank `a` against rank `b` (the baseline) op by op and kernel by kernel; by default the slowest rank
    against the median rank."""
    return compute_run_rank_compare(run, a, b)


@pages.get("/runs/{run_id}/ranks", response_class=HTMLResponse)
def ranks_page(request: Request, run: PageRunDep, state: StateDep) -> HTMLResponse:
    page = build_ranks_page(run)
    return render_page(request, state, "ranks.html", page, active="ranks", plotly=True)


@pages.get("/runs/{run_id}/ranks/compare", response_class=HTMLResponse)
def rank_compare_page(request: Request, run: PageRunDep, state: StateDep, a: RankNumber = None,
                      b: RankNumber = None) -> HTMLResponse:
    page = build_rank_compare_page(run, a, b)
    return render_page(request, state, "rank_compare.html", page, active="ranks", plotly=True)
