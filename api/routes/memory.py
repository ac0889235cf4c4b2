"""Memory of a run: where the bytes go (the page and its JSON twin, computed once by explorer.views.memory)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from api.deps import PageRunDep, RunDep, StateDep
from api.templating import render_page
from explorer.views.memory import MemoryResult, build_memory_page, compute_run_memory
from explorer.views.memory_track import MemoryAt, compute_run_memory_at

router = APIRouter(tags=["analysis"])
BaselineRun = Annotated[str, Query(max_length=64, description="a run id to compare the peaks against")]


@router.get("/api/runs/{run_id}/memory")
def memory(run: RunDep, state: StateDep, baseline: BaselineRun = "") -> MemoryResult:
    """From the run's [memory] events (profile_memory=True): per device the peak (its bytes = the maximum of Total
    Allocated, its time, what is live at it by owner op, module and size, summing to the peak), the timeline stacked
    by owner, the owners by bytes allocated, the allocations still live at the end grouped by owner (leaks), and
    the churn per ProfilerStep; allocator snapshots' and export_memory_timeline's reports. Times are ns from the
    run's start. baseline=RUN adds each peak against that run's, by owner."""
    return compute_run_memory(state.store, run.id, baseline)


@router.get("/api/runs/{run_id}/memory/at")
def memory_at(run: RunDep, state: StateDep, track: Annotated[int, Query(ge=0, le=2**31 - 1, description="a memory counter track")],
              at_ns: Annotated[int, Query(ge=-(2**62), le=2**62, description="ns from the run's start")]) -> MemoryAt:
    """What a memory counter track (`memory allocated|reserved (<device>) [bytes]`) shows at a time, for the
    timeline's hover: the [memory] event of its device in force at `at_ns` (the last at or before it; null before
    the first), with the op owning its bytes (a free: the freed allocation's owner, "" when it was made before the
    profile), and `next_ts_ns`, when the next event changes it (-1 none). 400 for a track that is not one."""
    return compute_run_memory_at(state.store, run.id, track, at_ns)


@router.get("/runs/{run_id}/memory", response_class=HTMLResponse, include_in_schema=False)
def memory_page(request: Request, run: PageRunDep, state: StateDep, baseline: BaselineRun = "") -> HTMLResponse:
    return render_page(request, state, "memory.html", build_memory_page(state.store, run.id, baseline), active="memory",
                   plotly=True)
