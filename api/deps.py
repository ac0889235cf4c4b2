"""Dependencies that resolve what a handler needs before its body runs (CONTRIBUTING.md, habit 3).

`RunDep` is a ready run, an `explorer.runs.Run` (404 unknown, 409 not ready); `AnyRunDep` a run record in any state;
`ShareRunDep` maps a share token to its run (for the share page and `/api/s/{token}`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from api.state import AppState
from explorer.errors import BadRequest, RunNotReady, ShareNotFound
from explorer.runs.run import Run
from explorer.runs.store import RunRecord
from explorer.views.kernels import KernelsQuery
from explorer.views.ops import OpsQuery


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.explorer
    return state


StateDep = Annotated[AppState, Depends(get_state)]


def get_run(run_id: str, state: StateDep) -> RunRecord:
    return state.store.get(run_id)


AnyRunDep = Annotated[RunRecord, Depends(get_run)]


def ready_run(state: AppState, run: RunRecord) -> Run:
    """A run record as a ready `Run` of the server's RunCache; 409 (RunNotReady) while it ingests or failed."""
    if run.status != "ready":
        raise RunNotReady(f"run {run.id} is {run.status}" + (f": {run.message}" if run.message else ""),
                          {"status": run.status, "progress": run.progress})
    return state.runs.of(run)


def get_ready_run(run: AnyRunDep, state: StateDep) -> Run:
    return ready_run(state, run)


RunDep = Annotated[Run, Depends(get_ready_run)]


class RunPageNotReady(Exception):
    """A page of a run that is not ready: api/errors.py renders the run's not-ready page (status, progress)."""

    def __init__(self, run: RunRecord) -> None:
        super().__init__(f"run {run.id} is {run.status}")
        self.run = run


def get_page_run(run: AnyRunDep, state: StateDep) -> Run:
    if run.status != "ready":
        raise RunPageNotReady(run)
    return state.runs.of(run)


# a page route's run: ready, or the not-ready page instead of the page (one handler, not a check per route)
PageRunDep = Annotated[Run, Depends(get_page_run)]


def get_share_run(token: str, state: StateDep) -> RunRecord:
    """The run a share token opens; 404 for unknown or revoked tokens."""
    share = state.store.catalog.resolve_share(token)
    if share is None or share.revoked:
        raise ShareNotFound("this share link is unknown or has been revoked")
    return state.store.get(share.run_id)


ShareRunDep = Annotated[RunRecord, Depends(get_share_run)]


# `rank=0,3`: the ranks a table keeps (explorer.analysis.rank_slices.parse_ranks reads it)
RankFilter = Annotated[str | None, Query(max_length=20000, description="comma-separated ranks, e.g. 0,3")]
# A time in ns relative to the run's origin: bounded well inside int64 so window arithmetic never overflows.
TIME_BOUND_NS = 2**62
RelNs = Annotated[int | None, Query(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS,
                                    description="ns relative to the run's origin")]


def parse_csv(value: str | None, what: str) -> list[str] | None:
    """A comma-separated query parameter as its items (None when absent or blank); bounded, so a huge list is a
    clear 400."""
    if value is None or not value.strip():
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if len(items) > 10000:
        raise BadRequest(f"too many {what}")
    return items


Limit = Annotated[int | None, Query(ge=0, le=100000, description="at most this many rows")]


def ops_query(sort: str | None = None, q: str = "", by_shape: bool = False, limit: Limit = None,
              view: str = OpsQuery.view, by_module: bool = False, rank: RankFilter = None, start_ns: RelNs = None,
              end_ns: RelNs = None, page: Annotated[int, Query(ge=1)] = 1,
              memory_device: Annotated[str, Query(max_length=200, description="the device of the memory columns "
                                                  "(CPU, CUDA 0, ...; default the highest peak)")] = "") -> OpsQuery:
    """The op table's query, the same for the page and its twin."""
    return OpsQuery(sort, q, by_shape, limit, view, by_module, rank or "", start_ns, end_ns, page, memory_device)


OpsQueryDep = Annotated[OpsQuery, Depends(ops_query)]


def kernels_query(sort: str = KernelsQuery.sort, q: str = "", category: str = "", limit: Limit = None,
                  rank: RankFilter = None, page: Annotated[int, Query(ge=1)] = 1) -> KernelsQuery:
    """The kernel table's query, the same for the page and its twin."""
    return KernelsQuery(sort, q, category, limit, rank or "", page)


KernelsQueryDep = Annotated[KernelsQuery, Depends(kernels_query)]
