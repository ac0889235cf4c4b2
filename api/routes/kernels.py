"""The kernel view's API: per device execution name statistics, launch parameters and categories of a run."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import RankFilter, RunDep, StateDep
from explorer.analysis.kernels import DEFAULT_KERNEL_SORT
from explorer.analysis.rank_slices import parse_ranks
from explorer.model.shapes import KernelsResult
from explorer.views.pages import kernels_json

router = APIRouter(tags=["analysis"])


@router.get("/api/runs/{run_id}/kernels")
def kernels(run: RunDep, state: StateDep, sort: str = DEFAULT_KERNEL_SORT,
            limit: Annotated[int | None, Query(ge=0, le=100000)] = None, q: str = "",
            category: str = "", rank: RankFilter = None) -> KernelsResult:
    """Kernels (and memcpy / memset / other device executions) by name: calls, total/avg/min/max and
    nearest-rank p50/p95 ns, % of device time, top launching ops, launch config; plus time per category.
    rank=0,3 keeps those ranks' executions."""
    return kernels_json(state.kernels(run.id, parse_ranks(rank)), sort=sort, q=q, category=category, limit=limit)
