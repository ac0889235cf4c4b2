"""The timeline window, event details with the linked chain, and search over the whole run."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, BackgroundTasks, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse

from api.deps import TIME_BOUND_NS, PageRunDep, RelNs, RunDep, StateDep, parse_csv
from api.responses import FastJSONResponse, fast_json
from api.routes.overview import warm_timeline
from api.templating import render_page
from explorer.analysis.chain import build_event_detail
from explorer.analysis.device.events import (
    build_device_event,
    compute_range_device_summaries,
    device_profile_link,
)
from explorer.analysis.search import compute_search
from explorer.analysis.timeline.index import WindowPart, compute_bounded_window
from explorer.analysis.timeline.layout import DEFAULT_HEIGHT_PX, MAX_HEIGHT_PX, scope_of
from explorer.errors import EventNotFound
from explorer.model.shapes import EventDetail, RangeDeviceSummaries, SearchResult, TimelineWindow
from explorer.model.source_links import SourceLinker
from explorer.store.run_queries import load_slice_column
from explorer.views.timeline import build_timeline_page

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
    asked, lane_set = _track_ids(tracks), set(parse_csv(lanes, "lanes") or [])
    index = run.timeline_index()
    parts = [WindowPart(index, scope_of(index.order, lane_set), asked)]
    device_index, devices = run.device_index(device_color), run.device_timeline()
    if device_index is not None and devices is not None:
        mine = None if profile is None else {t for t, p in devices.profile_of_track.items() if p == profile}
        parts.append(WindowPart(device_index, scope_of(device_index.order, lane_set, mine), asked))
    return fast_json(compute_bounded_window(parts, start, end, width_px, height_px))


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
    devices = run.device_timeline()
    if devices is not None and slice_id >= devices.first_slice_id:
        device = build_device_event(devices, slice_id, run.origin_ns)
        if device is None:
            raise EventNotFound(f"run {run.id} has no event {slice_id}", {"slice_id": slice_id})
        return fast_json(device)
    rows = state.store.slice_rows(run.id, [slice_id])
    if not rows:
        raise EventNotFound(f"run {run.id} has no event {slice_id}", {"slice_id": slice_id})
    detail = build_event_detail(run.table("slices"), run.table("flows"), rows[0], run.origin_ns)
    source = SourceLinker.from_settings(state.settings).for_event(
        rows[0]["name"], rows[0]["args"], [p["name"] for p in detail["parents"]])
    span = (int(rows[0]["ts_ns"]), int(rows[0]["ts_ns"]) + int(rows[0]["dur_ns"]))
    link = device_profile_link(state.store.device_profiles(run.id), slice_id, run.origin_ns, span) if devices else None
    return fast_json({**detail, **({"device_profile": link} if link else {}), **({"source_url": source} if source else {})})


@router.get("/timeline/device-summary", response_class=FastJSONResponse, response_model=RangeDeviceSummaries)
def range_device_summary(run: RunDep, state: StateDep, start_ns: Annotated[int, Query(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS)],
                         end_ns: Annotated[int, Query(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS)]) -> FastJSONResponse:
    """The device Summary of a timeline range (relative ns) for each device profile it overlaps."""
    if end_ns <= start_ns:
        raise _window_error("end_ns", f"end_ns ({end_ns}) must be greater than start_ns ({start_ns})")
    devices = run.device_timeline()
    profiles = state.store.device_profiles(run.id)
    found = [] if devices is None else compute_range_device_summaries(devices, profiles, start_ns, end_ns, run.origin_ns)
    return fast_json({"summaries": found})


@router.get("/search", response_class=FastJSONResponse, response_model=SearchResult)
def search(run: RunDep, state: StateDep, q: Annotated[str, Query(min_length=1, max_length=500)],
           regex: bool = False, args: bool = False,
           limit: Annotated[int, Query(ge=0, le=10000)] = 100) -> FastJSONResponse:
    """Count of matches over the whole run and the first `limit` in time order (relative ns)."""
    args_col = load_slice_column(state.store, run.id, "args") if args else None
    return fast_json(compute_search(run.timeline_index(), q, regex=regex, limit=limit, args=args_col))


@pages.get("/runs/{run_id}/timeline", response_class=HTMLResponse)
def timeline_page(request: Request, run: PageRunDep, state: StateDep, background: BackgroundTasks) -> HTMLResponse:
    warm_timeline(run, background)
    return render_page(request, state, "timeline.html", build_timeline_page(run), active="timeline")
