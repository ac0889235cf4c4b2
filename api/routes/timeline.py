"""The timeline page, its window, event details with the linked chain, and search over the whole run."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, BackgroundTasks, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse

from api.deps import TIME_BOUND_NS, PageRunDep, RelNs, RunDep, StateDep, parse_csv
from api.responses import FastJSONResponse, fast_json
from api.routes.overview import warm_timeline
from api.templating import render_page
from explorer.model.device_timeline_shapes import DeviceAlignmentsJson, DeviceChainTimelineJson
from explorer.model.shapes import EventDetail, RangeDeviceSummaries, SearchResult, TimelineWindow
from explorer.model.source_links import SourceLinker
from explorer.views.timeline import (
    DEFAULT_HEIGHT_PX,
    MAX_HEIGHT_PX,
    build_timeline_page,
    compute_device_alignment,
    compute_device_chain_timeline,
    compute_event,
    compute_range_summaries,
    compute_run_search,
    compute_run_window,
)

router = APIRouter(prefix="/api/runs/{run_id}", tags=["timeline"])
pages = APIRouter(include_in_schema=False)

MAX_WIDTH_PX = 20000


def _window_error(field: str, msg: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("query", field), "msg": msg, "type": "value_error"}])


@router.get("/timeline", response_class=FastJSONResponse, response_model=TimelineWindow)
def timeline(run: RunDep, state: StateDep, start_ns: RelNs = None, end_ns: RelNs = None,
             width_px: Annotated[int, Query(ge=1, le=MAX_WIDTH_PX)] = 2000,
             height_px: Annotated[int, Query(ge=1, le=MAX_HEIGHT_PX)] = DEFAULT_HEIGHT_PX,
             tracks: str | None = None, lanes: str | None = None, profile: str | None = None,
             device_color: Literal["opcode", "layer"] = "opcode") -> FastJSONResponse:
    """Level-of-detail window (relative ns): wide slices, per-pixel merged ones, counters, flows; the
    tracks of the run's device profiles too (only those of `profile` when given), their instructions
    named by opcode or by the PyTorch op they belong to (`device_color=layer`). Bounded in total: the
    tracks that fit `height_px` (those of `tracks=` first) in full, every other one in a per-lane summary."""
    first_start, first_end = run.default_window()
    start = first_start if start_ns is None else start_ns
    end = first_end if end_ns is None else end_ns
    if end <= start:
        raise _window_error("end_ns", f"end_ns ({end}) must be greater than start_ns ({start})")
    window = compute_run_window(run, start, end, width_px, height_px, _track_ids(tracks),
                                frozenset(parse_csv(lanes, "lanes") or []), profile, device_color)
    return fast_json(window)


def _track_ids(tracks: str | None) -> list[int] | None:
    ids = parse_csv(tracks, "tracks")
    try:
        return None if ids is None else [int(t) for t in ids]
    except ValueError:
        raise _window_error("tracks", "tracks must be comma-separated integers") from None


@router.get("/events/{slice_id}", response_class=FastJSONResponse, response_model=EventDetail)
def event(run: RunDep, state: StateDep, slice_id: int) -> FastJSONResponse:
    """All fields and args of one slice, its parents, children and linked chain across lanes; for a device
    slice its row's fields and its `Flow` dependencies; for an nc_exec_running its device profile."""
    return fast_json(compute_event(run, slice_id, SourceLinker.from_settings(state.settings)))


@router.get("/timeline/device-summary", response_class=FastJSONResponse, response_model=RangeDeviceSummaries)
def range_device_summary(run: RunDep, start_ns: Annotated[int, Query(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS)],
                         end_ns: Annotated[int, Query(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS)]) -> FastJSONResponse:
    """The device Summary of a timeline range (relative ns) for each device profile it overlaps."""
    if end_ns <= start_ns:
        raise _window_error("end_ns", f"end_ns ({end_ns}) must be greater than start_ns ({start_ns})")
    return fast_json(compute_range_summaries(run, start_ns, end_ns))


@router.get("/timeline/device-alignment", response_class=FastJSONResponse, response_model=DeviceAlignmentsJson)
def device_alignment(run: RunDep) -> FastJSONResponse:
    """Each device profile's alignment onto the host clock (explorer.analysis.device.align) and its span on the
    timeline (relative ns, shifted); no profiles, an empty list."""
    return fast_json(compute_device_alignment(run))


@router.get("/timeline/device-chain", response_class=FastJSONResponse, response_model=DeviceChainTimelineJson)
def device_chain(run: RunDep, profile: str, node: str,
                 mode: Literal["step", "trace"] = "trace") -> FastJSONResponse:
    """A device dependency chain (`node` Instruction:<id> or DmaPacket:<id>; one step up or traced to its
    root cause) as timeline items: slice ids, tracks, times relative on the timeline's axis, links with waits."""
    return fast_json(compute_device_chain_timeline(run, profile, node, mode))


@router.get("/search", response_class=FastJSONResponse, response_model=SearchResult)
def search(run: RunDep, q: Annotated[str, Query(min_length=1, max_length=500)], regex: bool = False,
           args: bool = False, limit: Annotated[int, Query(ge=0, le=10000)] = 100) -> FastJSONResponse:
    """Count of matches over the whole run and the first `limit` in time order (relative ns)."""
    return fast_json(compute_run_search(run, q, regex, args, limit))


@pages.get("/runs/{run_id}/timeline", response_class=HTMLResponse)
def timeline_page(request: Request, run: PageRunDep, state: StateDep, background: BackgroundTasks) -> HTMLResponse:
    warm_timeline(run, background)
    return render_page(request, state, "timeline.html", build_timeline_page(run), active="timeline")
