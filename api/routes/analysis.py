"""Op table, lane breakdown and run comparison."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import RankFilter, RelNs, RunDep, StateDep, parse_csv
from api.responses import FastJSONResponse, fast_json
from explorer.analysis.rank_slices import parse_ranks
from explorer.analysis.steps import DEFAULT_STEP_ANNOTATION, MAX_ANNOTATION_CHARS
from explorer.model.shapes import Breakdown, CompareResult, OpsResult, StepsResult
from explorer.model.source_links import SourceLinker
from explorer.store.queries import DEFAULT_OP_VIEW
from explorer.views.pages import compute_run_compare, compute_run_ops, compute_run_steps

router = APIRouter(tags=["analysis"])


@router.get("/api/runs/{run_id}/ops")
def ops(run: RunDep, state: StateDep, sort: str | None = None,
        limit: Annotated[int | None, Query(ge=0, le=100000)] = None, by_shape: bool = False, q: str = "",
        start_ns: RelNs = None, end_ns: RelNs = None, view: str = DEFAULT_OP_VIEW,
        by_module: bool = False, rank: RankFilter = None) -> OpsResult:
    """The op table (like key_averages()) in one view: operators (default), python (with_stack frames)
    or all. Sorted by self device time, or self CPU without a device, unless `sort` says otherwise;
    start_ns/end_ns (relative) keep ops starting in that range; by_module groups by nn.Module path;
    rank=0,3 keeps those ranks' slices."""
    return compute_run_ops(state.store, run, sort, q, by_shape, limit, view, by_module, start_ns, end_ns,
                           links=SourceLinker.from_settings(state.settings), ranks=parse_ranks(rank))


@router.get("/api/runs/{run_id}/breakdown", response_class=FastJSONResponse, response_model=Breakdown)
def breakdown(run: RunDep, state: StateDep, rank: RankFilter = None) -> FastJSONResponse:
    """Busy/idle per lane and device, and the gaps between device executions with a cause guess; rank=0,3
    keeps those ranks' slices (idle against the run's span)."""
    return fast_json(state.breakdown(run.id, parse_ranks(rank)))


@router.get("/api/runs/{run_id}/steps")
def steps(run: RunDep, state: StateDep,
          annotation: Annotated[str, Query(max_length=MAX_ANNOTATION_CHARS)] = DEFAULT_STEP_ANNOTATION) -> StepsResult:
    """One row per step (host slices whose name starts with `annotation`, default ProfilerStep#): step time,
    device busy, compute / communication / memcpy / memset / other / idle ns, and the slowest step."""
    return compute_run_steps(state.store, run.id, annotation)


@router.get("/api/compare")
def compare(state: StateDep, runs: str, baseline: str | None = None) -> CompareResult:
    """Two to eight runs op by op and kernel by kernel against the baseline: `baseline=` when given, else
    the first run tagged baseline/before, else the first run (the result names it and why, and lists it
    first)."""
    return compute_run_compare(state.store, parse_csv(runs, "runs") or [], baseline)
