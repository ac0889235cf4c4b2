"""The timeline page (`/runs/{id}/timeline`) and the tracks list its canvas reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from explorer.analysis.chain import build_event_detail
from explorer.analysis.device.align import build_alignment_rows
from explorer.analysis.device.chain import compute_chain, parse_node_ref
from explorer.analysis.device.chain_timeline import build_chain_timeline
from explorer.analysis.device.events import (
    build_device_event,
    compute_range_device_summaries,
    device_profile_link,
)
from explorer.analysis.device.tracks import device_track_rows
from explorer.analysis.search import compute_search
from explorer.analysis.timeline.index import WindowPart, compute_bounded_window
from explorer.analysis.timeline.layout import DEFAULT_HEIGHT_PX, MAX_HEIGHT_PX, display_order, scope_of
from explorer.errors import DeviceProfileNotFound, EventNotFound
from explorer.model.ranks import track_ranks
from explorer.model.shapes import (
    RunJson,
    Tracks,
)
from explorer.model.source_links import SourceLinker
from explorer.runs.run import Run
from explorer.store.run_queries import load_slice_column
from explorer.views.links import run_json


@dataclass
class TimelinePage:
    """`/runs/{id}/timeline`; the canvas pulls `/api/runs/{id}/timeline` windows itself."""

    run: RunJson
    span_ns: int
    twin: str = ""


def build_timeline_page(run: Run) -> TimelinePage:
    start, end = run.default_window()
    return TimelinePage(run_json(run.record), run.span_ns,
                        f"/api/runs/{run.id}/timeline?start_ns={start}&end_ns={end}&width_px=2000")


def build_tracks(run: Run, offset: int = 0, limit: int | None = None) -> Tracks:
    """The `/api/runs/{id}/tracks` object: every column of the tracks table (sort_key included: the
    timeline orders tracks by it within a lane), `total` of them. With `limit`, one page of the tracks in
    the timeline's order (a run of a million thread ids lists in milliseconds). Runs stored before the rank
    column get it read from their instance labels (explorer.model.ranks)."""
    table = run.table("tracks")
    total = table.num_rows
    if limit is not None:
        table = table.take(pa.array(display_order(table)[offset:offset + limit]))
    rows: Any = table.to_pylist()
    if "rank" not in table.column_names:
        for row, rank in zip(rows, track_ranks(table).tolist(), strict=True):
            row["rank"], row["host"] = int(rank), ""
    return {"origin_ns": run.origin_ns, "tracks": rows, "total": total}


__all__ = ["DEFAULT_HEIGHT_PX", "MAX_HEIGHT_PX", "TimelinePage", "build_timeline_page", "build_tracks",
           "compute_device_alignment", "compute_device_chain_timeline", "compute_event", "compute_range_summaries", "compute_run_search", "compute_run_window", "run_tracks"]


def run_tracks(run: Run, offset: int = 0, limit: int | None = None) -> Tracks:
    """The `/api/runs/{id}/tracks` object: build_tracks's page, then the tracks of the run's device profiles (on
    the first page), each with its `device_profile` and `group`."""
    result = build_tracks(run, offset, limit)
    devices = run.device_timeline()
    if devices is not None:
        rows = device_track_rows(devices)
        result["total"] += len(rows)
        result["tracks"] = result["tracks"] + (rows if offset == 0 else [])
    return result


def compute_run_window(run: Run, start_ns: int, end_ns: int, width_px: int, height_px: int,
                       tracks: list[int] | None = None, lanes: frozenset[str] = frozenset(),
                       profile: str | None = None, device_color: str = "opcode") -> dict[str, Any]:
    """The `/api/runs/{id}/timeline` object: the level-of-detail window [start_ns, end_ns) (relative) of the run's
    tracks and of its device profiles' (only `profile`'s when given), bounded by `height_px`."""
    index = run.timeline_index()
    parts = [WindowPart(index, scope_of(index.order, set(lanes)), tracks)]
    device_index, devices = run.device_index(device_color), run.device_timeline()
    if device_index is not None and devices is not None:
        mine = None if profile is None else {t for t, p in devices.profile_of_track.items() if p == profile}
        parts.append(WindowPart(device_index, scope_of(device_index.order, set(lanes), mine), tracks))
    return compute_bounded_window(parts, start_ns, end_ns, width_px, height_px)


def compute_event(run: Run, slice_id: int, links: SourceLinker) -> dict[str, Any]:
    """The `/api/runs/{id}/events/{slice_id}` object: a host slice's fields, args, parents, children and linked
    chain (its source link and device profile when it has them), or a device slice's row and dependencies."""
    devices = run.device_timeline()
    if devices is not None and slice_id >= devices.first_slice_id:
        device = build_device_event(devices, slice_id, run.origin_ns)
        if device is None:
            raise EventNotFound(f"run {run.id} has no event {slice_id}", {"slice_id": slice_id})
        return dict(device)
    rows = run.store.slice_rows(run.id, [slice_id])
    if not rows:
        raise EventNotFound(f"run {run.id} has no event {slice_id}", {"slice_id": slice_id})
    detail = build_event_detail(run.table("slices"), run.table("flows"), rows[0], run.origin_ns)
    source = links.for_event(rows[0]["name"], rows[0]["args"], [p["name"] for p in detail["parents"]])
    span = (int(rows[0]["ts_ns"]), int(rows[0]["ts_ns"]) + int(rows[0]["dur_ns"]))
    link = (device_profile_link(run.store.device_profiles(run.id), slice_id, run.origin_ns, span)
            if devices else None)
    return {**detail, **({"device_profile": link} if link else {}), **({"source_url": source} if source else {})}


def compute_range_summaries(run: Run, start_ns: int, end_ns: int) -> dict[str, Any]:
    """The device Summary of a timeline range (relative ns) for each device profile it overlaps."""
    devices = run.device_timeline()
    profiles = run.store.device_profiles(run.id)
    found = [] if devices is None else compute_range_device_summaries(devices, profiles, start_ns, end_ns,
                                                                      run.origin_ns)
    return {"summaries": found}


def compute_run_search(run: Run, q: str, regex: bool = False, args: bool = False, limit: int = 100) -> dict[str, Any]:
    """Matches of `q` over the whole run: the count and the first `limit` in time order (relative ns)."""
    args_col = load_slice_column(run.store, run.id, "args") if args else None
    return compute_search(run.timeline_index(), q, regex=regex, limit=limit, args=args_col)


def compute_device_alignment(run: Run) -> dict[str, Any]:
    """Each device profile's alignment onto the host clock (explorer.analysis.device.align) and its span on the
    timeline (relative ns, shifted); no profiles, an empty list."""
    devices = run.device_timeline()
    if devices is None:
        return {"profiles": []}
    return {"profiles": build_alignment_rows(run.store.device_profiles(run.id), devices.alignments, run.origin_ns)}


def compute_device_chain_timeline(run: Run, profile: str, node: str, mode: str) -> dict[str, Any]:
    """A device dependency chain (one step up, or traced to its root cause) as timeline items: slice ids, tracks,
    times relative on the timeline's axis, links with waits."""
    devices = run.device_timeline()
    if devices is None or profile not in devices.profiles:
        known = [] if devices is None else devices.profiles
        raise DeviceProfileNotFound(f"run {run.id}: no device profile {profile!r} on its timeline",
                                    {"profile_id": profile, "profiles": known})
    name, ident = parse_node_ref(node)
    chain = compute_chain(devices.tables[profile], name, ident, mode == "trace")
    return dict(build_chain_timeline(devices, profile, chain, mode, f"{name}:{ident}", run.origin_ns))
