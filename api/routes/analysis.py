"""Op table, lane breakdown and run comparison."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.deps import RunDep, StateDep, get_ready_run, origin_ns
from api.responses import FastJSONResponse, fast_json
from api.routes.runs import parse_csv
from explorer.analysis.compare import RunOps, compute_compare
from explorer.errors import BadRequest
from explorer.store.queries import load_ops
from explorer.store.run_queries import load_ops_in_range

router = APIRouter(tags=["analysis"])

MAX_COMPARE = 8


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
def compare(state: StateDep, runs: str) -> dict[str, Any]:
    """Two or more runs op by op against the first (the baseline)."""
    ids = parse_csv(runs, "runs") or []
    if not 2 <= len(ids) <= MAX_COMPARE:
        raise BadRequest(f"compare needs 2 to {MAX_COMPARE} run ids, comma-separated")
    records = [get_ready_run(state.store.get(i)) for i in ids]
    return compute_compare([
        RunOps(r.id, r.name, state.store.table(r.id, "op_stats"),
               int(r.summary.get("device", {}).get("device_total_ns", 0))) for r in records])
