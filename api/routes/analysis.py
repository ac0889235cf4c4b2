"""Op table, lane breakdown and run comparison."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.deps import RunDep, StateDep, origin_ns
from api.responses import FastJSONResponse, fast_json
from api.routes.runs import parse_csv
from explorer.report import compute_run_compare
from explorer.store.queries import (
    DEFAULT_OP_VIEW,
    default_op_sort,
    has_module_frames,
    load_ops,
    run_device_total_ns,
)
from explorer.store.run_queries import load_ops_in_range

router = APIRouter(tags=["analysis"])


@router.get("/api/runs/{run_id}/ops")
def ops(run: RunDep, state: StateDep, sort: str | None = None,
        limit: Annotated[int | None, Query(ge=0, le=100000)] = None, by_shape: bool = False, q: str = "",
        start_ns: int | None = None, end_ns: int | None = None, view: str = DEFAULT_OP_VIEW,
        by_module: bool = False) -> dict[str, Any]:
    """The op table (like key_averages()) in one view: operators (default), python (with_stack frames)
    or all. Sorted by self device time, or self CPU without a device, unless `sort` says otherwise;
    start_ns/end_ns (relative) keep ops starting in that range; by_module groups by nn.Module path."""
    device_total = run_device_total_ns(run)
    sort = sort or default_op_sort(device_total)
    if start_ns is None and end_ns is None:
        rows = load_ops(state.store, run.id, sort=sort, limit=limit, by_shape=by_shape, name_filter=q, view=view,
                        by_module=by_module)
    else:
        origin = origin_ns(run)
        start = origin + (start_ns or 0)
        end = origin + (end_ns if end_ns is not None else int(run.summary.get("span_ns", 0)) + 1)
        rows = load_ops_in_range(state.store, run.id, start, end, sort=sort, limit=limit, by_shape=by_shape,
                                 name_filter=q, view=view, by_module=by_module)
    return {"rows": rows, "device_total_ns": device_total, "view": view, "sort": sort,
            "has_modules": has_module_frames(state.store, run.id)}


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
