"""The kernels: per device execution name statistics, launch parameters and categories; the page and its twin,
one query (KernelsQueryDep)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.deps import KernelsQueryDep, PageRunDep, RunDep, StateDep
from api.templating import render_page
from explorer.model.shapes import KernelsResult
from explorer.views.kernels import build_kernels_page, compute_run_kernels

router = APIRouter(tags=["analysis"])


@router.get("/api/runs/{run_id}/kernels")
def kernels(run: RunDep, query: KernelsQueryDep) -> KernelsResult:
    """Kernels (and memcpy / memset / other device executions) by name: calls, total/avg/min/max and
    nearest-rank p50/p95 ns, % of device time, top launching ops, launch config; plus time per category.
    rank=0,3 keeps those ranks' executions."""
    return compute_run_kernels(run, query)


@router.get("/runs/{run_id}/kernels", response_class=HTMLResponse, include_in_schema=False)
def kernels_page(request: Request, run: PageRunDep, state: StateDep, query: KernelsQueryDep) -> HTMLResponse:
    return render_page(request, state, "kernels.html", build_kernels_page(run, query), active="kernels", plotly=True)
