"""Op table, lane breakdown and run comparison."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.deps import RunDep, StateDep, origin_ns
from api.responses import FastJSONResponse, fast_json
from api.routes.runs import parse_csv
from explorer.report import compute_run_compare
from explorer.store.queries import load_ops
from explorer.store.run_queries import load_ops_in_range

router = APIRouter(tags=["analysis"])


@router.get("/api/runs/{run_id}/ops")
def ops(run: RunDep, state: StateDep, sort: str = "-device_total_ns",
        limit: Annotated[int | None, Query(ge=0, le=100000)] = None, by_shape: bool = False, q: str = "",
        start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
    """The op table (like key_averages()); start_ns/end_ns (relative) keep ops starting in that range."""
    if start_ns is None and end_ns is None:
        rows = load_ops(state.store, run.id, sort=sort, limit=limit, by_shape=by_shape, name_filter=q)
    else:
        origin = origin_ns(run)
        start = origin + (start_ns or 0)
        end = origin + (end_ns if end_ns is not None else int(run.summary.get("span_ns", 0)) + 1)
        rows = load_ops_in_range(state.store, run.id, start, end, sort=sort, limit=limit, by_shape=by_shape,
                                 name_filter=q)
    return {"rows": rows, "device_total_ns": run.summary.get("device", {}).get("device_total_ns", 0)}


@router.get("/api/runs/{run_id}/breakdown", response_class=FastJSONResponse)
def breakdown(run: RunDep, state: StateDep) -> FastJSONResponse:
    """Busy/idle per lane and device, and the gaps between device executions with a cause guess."""
    return fast_json(state.breakdown(run.id))


@router.get("/api/compare")
def compare(state: StateDep, runs: str, baseline: str | None = None) -> dict[str, Any]:
    """Two to eight runs op by op and kernel by kernel against the baseline: `baseline=` when given, else
    the first run tagged baseline/before, else the first run (the result names it and why, and lists it
    first)."""
    return compute_run_compare(state.store, parse_csv(runs, "runs") or [], baseline)
