"""The timeline window, event details with the linked chain, and search over the whole run."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError

from api.deps import TIME_BOUND_NS, RelNs, RunDep, StateDep, origin_ns, parse_csv
from api.responses import FastJSONResponse, fast_json
from explorer.analysis.chain import build_event_detail
from explorer.analysis.device_align import build_alignment_rows
from explorer.analysis.device_chain import compute_chain, parse_node_ref
from explorer.analysis.device_chain_timeline import build_chain_timeline
from explorer.analysis.device_events import (
    build_device_event,
    compute_range_device_summaries,
    device_profile_link,
)
from explorer.analysis.lod import WindowPart, compute_bounded_window
from explorer.analysis.lod_budget import DEFAULT_HEIGHT_PX, MAX_HEIGHT_PX, scope_of
from explorer.analysis.search import compute_search
from explorer.errors import DeviceProfileNotFound, EventNotFound
from explorer.model.device_timeline_shapes import DeviceAlignmentsJson, DeviceChainTimelineJson
from explorer.model.shapes import EventDetail, RangeDeviceSummaries, SearchResult, TimelineWindow
from explorer.model.source_links import SourceLinker
from explorer.store.run_queries import load_slice_column

router = APIRouter(prefix="/api/runs/{run_id}", tags=["timeline"])

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
    span = run.summary.span_ns
    start = 0 if start_ns is None else start_ns
    end = max(span, 1) if end_ns is None else end_ns
    if end <= start:
        raise _window_error("end_ns", f"end_ns ({end}) must be greater than start_ns ({start})")
    asked, lane_set = _track_ids(tracks), set(parse_csv(lanes, "lanes") or [])
    ix = state.timeline_index(run.id, origin_ns(run))
    parts = [WindowPart(ix, scope_of(ix.order, lane_set), asked)]
    dix, dt = state.device_index(run.id, origin_ns(run), device_color), state.device_timeline(run.id)
    if dix is not None and dt is not None:
        mine = None if profile is None else {t for t, p in dt.profile_of_track.items() if p == profile}
        parts.append(WindowPart(dix, scope_of(dix.order, lane_set, mine), asked))
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
    dt = state.device_timeline(run.id)
    if dt is not None and slice_id >= dt.first_slice_id:
        device = build_device_event(dt, slice_id, origin_ns(run))
        if device is None:
            raise EventNotFound(f"run {run.id} has no event {slice_id}", {"slice_id": slice_id})
        return fast_json(device)
    rows = state.store.slice_rows(run.id, [slice_id])
    if not rows:
        raise EventNotFound(f"run {run.id} has no event {slice_id}", {"slice_id": slice_id})
    slices, flows = state.store.table(run.id, "slices"), state.store.table(run.id, "flows")
    detail = build_event_detail(slices, flows, rows[0], origin_ns(run))
    source = SourceLinker.from_settings(state.settings).for_event(
        rows[0]["name"], rows[0]["args"], [p["name"] for p in detail["parents"]])
    span = (int(rows[0]["ts_ns"]), int(rows[0]["ts_ns"]) + int(rows[0]["dur_ns"]))
    link = device_profile_link(state.store.device_profiles(run.id), slice_id, origin_ns(run), span) if dt else None
    return fast_json({**detail, **({"device_profile": link} if link else {}), **({"source_url": source} if source else {})})


@router.get("/timeline/device-summary", response_class=FastJSONResponse, response_model=RangeDeviceSummaries)
def range_device_summary(run: RunDep, state: StateDep, start_ns: Annotated[int, Query(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS)],
                         end_ns: Annotated[int, Query(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS)]) -> FastJSONResponse:
    """The device Summary of a timeline range (relative ns) for each device profile it overlaps."""
    if end_ns <= start_ns:
        raise _window_error("end_ns", f"end_ns ({end_ns}) must be greater than start_ns ({start_ns})")
    dt = state.device_timeline(run.id)
    profiles = state.store.device_profiles(run.id)
    found = [] if dt is None else compute_range_device_summaries(dt, profiles, start_ns, end_ns, origin_ns(run))
    return fast_json({"summaries": found})


@router.get("/timeline/device-alignment", response_class=FastJSONResponse, response_model=DeviceAlignmentsJson)
def device_alignment(run: RunDep, state: StateDep) -> FastJSONResponse:
    """Each device profile's alignment onto the host clock (explorer.analysis.device_align) and its span on the
    timeline (relative ns, shifted); no profiles, an empty list."""
    dt = state.device_timeline(run.id)
    if dt is None:
        return fast_json({"profiles": []})
    rows = build_alignment_rows(state.store.device_profiles(run.id), dt.alignments, origin_ns(run))
    return fast_json({"profiles": rows})


@router.get("/timeline/device-chain", response_class=FastJSONResponse, response_model=DeviceChainTimelineJson)
def device_chain(run: RunDep, state: StateDep, profile: str, node: str,
                 mode: Literal["step", "trace"] = "trace") -> FastJSONResponse:
    """A device dependency chain (`node` Instruction:<id> or DmaPacket:<id>; one step up or traced to its
    root cause) as timeline items: slice ids, tracks, times relative on the timeline's axis, links with waits."""
    dt = state.device_timeline(run.id)
    if dt is None or profile not in dt.profiles:
        known = [] if dt is None else dt.profiles
        raise DeviceProfileNotFound(f"run {run.id}: no device profile {profile!r} on its timeline",
                                    {"profile_id": profile, "profiles": known})
    name, ident = parse_node_ref(node)
    chain = compute_chain(dt.tables[profile], name, ident, mode == "trace")
    return fast_json(build_chain_timeline(dt, profile, chain, mode, f"{name}:{ident}", origin_ns(run)))


@router.get("/search", response_class=FastJSONResponse, response_model=SearchResult)
def search(run: RunDep, state: StateDep, q: Annotated[str, Query(min_length=1, max_length=500)],
           regex: bool = False, args: bool = False,
           limit: Annotated[int, Query(ge=0, le=10000)] = 100) -> FastJSONResponse:
    """Count of matches over the whole run and the first `limit` in time order (relative ns)."""
    ix = state.timeline_index(run.id, origin_ns(run))
    args_col = load_slice_column(state.store, run.id, "args") if args else None
    return fast_json(compute_search(ix, q, regex=regex, limit=limit, args=args_col))
