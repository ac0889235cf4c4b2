"""The total budget of a timeline window: the tracks that fit its pixel height are sent in full, every other
track in scope is one summary row per lane with its busy time per pixel column (exact integer ns).
Vectorised over tracks, so a request's Python work does not grow with the run's track count; no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.timeline.levels import segmented_running_max
from explorer.model.lanes import LANE_ORDER

I64 = np.int64
# the least height a track row takes in the timeline (static/js/tracks.js ROW_H + lanes.js TRACK_GAP):
# a window of `height_px` shows at most height_px // TRACK_ROW_PX tracks, so no more are sent in full
TRACK_ROW_PX = 22
DEFAULT_HEIGHT_PX = 1000
MAX_HEIGHT_PX = 20_000


def track_budget(height_px: int) -> int:
    """How many tracks a window of `height_px` sends in full (at least one)."""
    return max(1, height_px // TRACK_ROW_PX)


@dataclass
class TrackOrder:
    """A run's tracks in the timeline's order (lane, then sort_key, then id: static/js/lanes.js
    groupTracks) and its top-level slices per lane, sorted by start with a running maximum of ends."""

    ids: np.ndarray  # track ids in display order
    lane_code: np.ndarray  # per entry of `ids`, an index into `lanes`
    lanes: list[str]  # lane names, in lane order
    id_bound: int  # one past the largest track id (for lookup tables by id)
    lane_of_track: np.ndarray  # by track id, its lane code
    lane_count: np.ndarray  # per lane code, how many tracks
    top_lo: np.ndarray  # per lane code, the range of its top-level slices in the top_* arrays
    top_hi: np.ndarray
    top_ts: np.ndarray  # relative ns
    top_end: np.ndarray
    top_end_max: np.ndarray  # running max of top_end within a lane
    top_track: np.ndarray


def lane_rank(lane: str) -> tuple[int, str]:
    """Lanes sort in the Lane enum's order (framework, runtime, hardware, counter, other), unknown ones last."""
    return LANE_ORDER.get(lane, len(LANE_ORDER)), lane


def lane_codes(tracks: pa.Table) -> tuple[list[str], np.ndarray]:
    """The lanes of `tracks` in lane order, and each row's index into them (a dictionary encoding: no
    Python string per track)."""
    if not tracks.num_rows:
        return [], np.zeros(0, I64)
    encoded = pc.dictionary_encode(tracks.column("lane")).combine_chunks()
    found = encoded.dictionary.to_pylist()
    lanes = sorted(set(found), key=lane_rank)
    remap = np.asarray([lanes.index(lane) for lane in found], I64)
    return lanes, remap[encoded.indices.to_numpy(zero_copy_only=False)]


def display_order(tracks: pa.Table, lane_code: np.ndarray | None = None) -> np.ndarray:
    """Row indices of `tracks` in the timeline's order: lane, then sort_key, then track_id."""
    ids = tracks.column("track_id").to_numpy().astype(I64)
    sort_key = (tracks.column("sort_key").to_numpy(zero_copy_only=False).astype(I64)
                if "sort_key" in tracks.column_names else np.zeros(len(ids), I64))
    order: np.ndarray = np.lexsort((ids, sort_key, lane_codes(tracks)[1] if lane_code is None else lane_code))
    return order


def build_track_order(tracks: pa.Table, track: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                      depth: np.ndarray) -> TrackOrder:
    """The display order of `tracks` and the top-level slices (`track`, `ts`, `dur`, `depth` per slice,
    relative ns) per lane; a few sorts, paid once per run."""
    ids = tracks.column("track_id").to_numpy().astype(I64)
    lanes, lane_code = lane_codes(tracks)
    order = display_order(tracks, lane_code)
    bound = int(ids.max(initial=-1)) + 1
    lane_of_track = np.zeros(bound, I64)
    lane_of_track[ids] = lane_code
    top = np.flatnonzero(depth == 0)
    top_track = track[top]
    inside = (top_track >= 0) & (top_track < bound)
    top, top_track = top[inside], top_track[inside]
    del inside
    t_lane = lane_of_track[top_track]
    top_ts = ts[top]
    t_order = np.lexsort((top_ts, t_lane))  # (each per-slice array made once, in final order: a run's top-level
    top, t_lane, top_ts = top[t_order], t_lane[t_order], top_ts[t_order]  # slices are most of its slices)
    top_track = top_track[t_order].astype(I64)
    del t_order
    top_end = top_ts + dur[top]
    codes = np.arange(len(lanes))
    return TrackOrder(ids=ids[order], lane_code=lane_code[order], lanes=lanes, id_bound=bound,
                      lane_of_track=lane_of_track, lane_count=np.bincount(lane_code, minlength=len(lanes)),
                      top_lo=np.searchsorted(t_lane, codes, side="left").astype(I64),
                      top_hi=np.searchsorted(t_lane, codes, side="right").astype(I64),
                      top_ts=top_ts, top_end=top_end, top_end_max=segmented_running_max(top_end, t_lane),
                      top_track=top_track)


def scope_of(order: TrackOrder, lanes: set[str] | None, allowed: set[int] | None = None) -> np.ndarray:
    """The track ids a window covers, in display order: those of `lanes` (all without), and of `allowed`."""
    ids = order.ids
    if lanes:
        ids = ids[np.isin(order.lane_code, [i for i, lane in enumerate(order.lanes) if lane in lanes])]
    if allowed is not None:
        ids = ids[np.isin(ids, np.fromiter(allowed, I64, len(allowed)))]
    return ids


@dataclass
class SummaryPart:
    """One index's share of a window: its track order, the tracks in scope and those sent in full."""

    order: TrackOrder
    scope: np.ndarray
    full: list[int]


def compute_summaries(parts: list[SummaryPart], start_ns: int, end_ns: int,
                      width_px: int) -> list[dict[str, Any]]:
    """One row per lane for the tracks in scope that are not sent in full: how many, and their busy ns per
    pixel column (column p covers [start + p*span//width, start + (p+1)*span//width)). Lanes with no
    summarised track have no row. Parts sharing a lane (run and device tracks) share its row."""
    bounds = pixel_bounds(start_ns, end_ns, width_px)
    counts: dict[str, int] = {}
    spans: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for part in parts:
        o = part.order
        full = np.asarray([t for t in part.full if 0 <= t < o.id_bound], I64)
        summarised = _Summarised(o, part.scope, full)
        per_lane = summarised.per_lane()
        for code in np.flatnonzero(per_lane).tolist():
            lane = o.lanes[code]
            counts[lane] = counts.get(lane, 0) + int(per_lane[code])
            spans.setdefault(lane, []).append(_lane_slices(o, code, summarised, start_ns, end_ns))
    rows = []
    for lane in sorted(counts, key=lane_rank):
        a = np.concatenate([s[0] for s in spans[lane]])
        b = np.concatenate([s[1] for s in spans[lane]])
        if len(spans[lane]) > 1:
            by_start = np.argsort(a, kind="stable")
            a, b = a[by_start], b[by_start]
        rows.append({"lane": lane, "tracks": counts[lane], "busy_ns": busy_per_column(a, b, bounds).tolist()})
    return rows


class _Summarised:
    """Which tracks of one part a window summarises: the scope less those sent in full. For the whole run
    (the common case) that costs the few full tracks, not a lookup table over every track."""

    def __init__(self, order: TrackOrder, scope: np.ndarray, full: np.ndarray) -> None:
        self.order, self.full = order, full
        self.whole = len(scope) == len(order.ids)
        if not self.whole:
            self.table = np.zeros(order.id_bound, bool)
            self.table[scope] = True
            self.table[full] = False

    def per_lane(self) -> np.ndarray:
        o = self.order
        if self.whole:
            counts: np.ndarray = o.lane_count - np.bincount(o.lane_of_track[self.full], minlength=len(o.lanes))
            return counts
        return np.bincount(o.lane_code[self.table[o.ids]], minlength=len(o.lanes))

    def mask(self, tracks: np.ndarray) -> np.ndarray:
        if self.whole:
            return ~np.isin(tracks, self.full)
        keep: np.ndarray = self.table[tracks]
        return keep


def _lane_slices(o: TrackOrder, code: int, left: _Summarised, start_ns: int,
                 end_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (sorted by start) of the lane's top-level slices on summarised tracks that overlap
    [start, end): two binary searches, then a mask over the window's candidates."""
    lo, hi = int(o.top_lo[code]), int(o.top_hi[code])
    a = lo + int(np.searchsorted(o.top_end_max[lo:hi], start_ns, side="right"))
    b = lo + int(np.searchsorted(o.top_ts[lo:hi], end_ns, side="left"))
    if b <= a:
        return np.zeros(0, I64), np.zeros(0, I64)
    keep = left.mask(o.top_track[a:b]) & (o.top_end[a:b] > start_ns)
    return o.top_ts[a:b][keep], o.top_end[a:b][keep]


def pixel_bounds(start_ns: int, end_ns: int, width_px: int) -> np.ndarray:
    """The width_px + 1 integer column edges: start + p * span // width, without an int64 overflow of
    p * span (spans of days at 20,000 px)."""
    span = end_ns - start_ns
    p = np.arange(width_px + 1, dtype=I64)
    whole, part = divmod(span, width_px)
    return start_ns + p * whole + (p * part) // width_px


def busy_per_column(a: np.ndarray, b: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per column between consecutive `bounds`, the ns covered by the union of intervals [a_i, b_i)
    (sorted by a): the intervals merged where they overlap, then a covered-time function read at the
    column edges."""
    if not len(a):
        return np.zeros(len(bounds) - 1, I64)
    reach = np.maximum.accumulate(b)
    first = np.flatnonzero(np.concatenate(([True], a[1:] > reach[:-1])))
    last = np.append(first[1:] - 1, len(a) - 1)
    u_a, u_b = a[first], reach[last]
    before = np.concatenate(([0], np.cumsum(u_b - u_a)))  # covered ns before each merged interval
    k = np.searchsorted(u_a, bounds, side="right") - 1
    inside = np.clip(bounds - u_a[np.maximum(k, 0)], 0, (u_b - u_a)[np.maximum(k, 0)])
    covered = np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)
    return np.diff(covered)
