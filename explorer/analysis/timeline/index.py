"""Level-of-detail timeline windows over a run's cached columns, bounded by the window's pixel width: an index
built once per run (two binary searches per track and depth find a window's slices) and the window itself,
slices under a pixel merged per column. No I/O. How the index works: docs/architecture.md,
"analysis/timeline/index.py"."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from functools import reduce
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.timeline.fold import fold_keys, track_folds
from explorer.analysis.timeline.layout import (
    SummaryPart,
    TrackOrder,
    build_track_order,
    compute_summaries,
    track_budget,
)
from explorer.analysis.timeline.levels import (
    LEVEL_PIECE,
    Items,
    Level,
    concat_items,
    gather,
    iter_levels,
    pick_level,
    reduce_runs,
    segmented_running_max,
    window_ranges,
)
from explorer.model.tables import FLOWS

I64 = np.int64
# below this many candidate slices a window is computed from the raw slices (exact); above, from a level
RAW_LIMIT = 20_000


@dataclass
class TimelineIndex:
    """Per-run arrays for window queries (relative ns); build once, read by many requests."""

    origin_ns: int
    names: list[str]  # name dictionary; `name` holds codes into it
    slice_id: np.ndarray  # per position (track, depth, ts order)
    ts: np.ndarray
    dur: np.ndarray
    end_max: np.ndarray  # running max of ts+dur within each (track, depth) group
    depth: np.ndarray
    fold: np.ndarray  # per position: the Python-stack fold key (lod_fold); the depth on runs without Python frames
    name: np.ndarray
    group_track: np.ndarray  # per (track, depth, fold) group
    group_depth: np.ndarray
    group_fold: np.ndarray
    group_lo: np.ndarray
    group_hi: np.ndarray
    track_kind: dict[int, str]
    track_lane: dict[int, str]
    counter_ranges: dict[int, tuple[int, int]]
    counter_ts: np.ndarray
    counter_value: np.ndarray
    instant_ranges: dict[int, tuple[int, int]]  # instants are sorted by track, then time
    instant_ts: np.ndarray
    instant_names: list[str]
    instant_name: np.ndarray
    flow_id: np.ndarray  # flows sorted by the start time of their source slice
    flow_from: np.ndarray
    flow_to: np.ndarray
    flow_kind: list[str]
    flow_kind_code: np.ndarray
    flow_from_ts: np.ndarray
    flow_to_ts: np.ndarray
    flow_from_track: np.ndarray
    flow_to_track: np.ndarray
    flow_wide_ns: np.ndarray  # the longer of the two end slices: a flow shows once that is a pixel wide
    slice_track: np.ndarray  # by slice_id
    levels: list[Level]
    order: TrackOrder  # the tracks in display order and the top-level slices per lane (lod_budget)


def _dictionary(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """The column's distinct values, sorted, and each row's code into them: the same whatever encoding the column
    came in (the ingest's tables hold sorted dictionaries already; a table read back from Parquet, plain text),
    so an index the ingest stored equals one a server builds."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    values = encoded.dictionary
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    by_value = np.asarray(pc.array_sort_indices(values))
    if not np.array_equal(by_value, np.arange(len(by_value))):
        rank = np.empty(len(by_value), np.int32)
        rank[by_value] = np.arange(len(by_value), dtype=np.int32)
        codes = rank[codes]
        values = values.take(pa.array(by_value))
    return values.to_pylist(), codes


class IndexSink(Protocol):
    """Where an index's parts go as each becomes final: kept in memory (MemorySink) or written to files and
    dropped (explorer.store.index_files.FileSink, the ingest's: what the build holds then stays small)."""

    def put(self, name: str, value: Any) -> None: ...

    def level(self, level: Level) -> None: ...


class MemorySink:
    def __init__(self) -> None:
        self.parts: dict[str, Any] = {}
        self.levels: list[Level] = []

    def put(self, name: str, value: Any) -> None:
        self.parts[name] = value

    def level(self, level: Level) -> None:
        self.levels.append(level)

    def index(self) -> TimelineIndex:
        return TimelineIndex(**self.parts, levels=self.levels)


def build_timeline_index(slices: pa.Table, tracks: pa.Table, counters: pa.Table, flows: pa.Table,
                         origin_ns: int, instants: pa.Table | None = None) -> TimelineIndex:
    """Arrange a run's columns for window queries. Cost is a sort of the slices, paid once per run."""
    sink = MemorySink()
    build_index_into(sink, slices, tracks, counters, flows, origin_ns, instants)
    return sink.index()


def build_index_into(sink: IndexSink, slices: pa.Table, tracks: pa.Table, counters: pa.Table, flows: pa.Table,
                     origin_ns: int, instants: pa.Table | None = None, piece: int = LEVEL_PIECE,
                     threads: int = 1) -> None:
    """The index's parts, each handed to `sink` as soon as it is final and then dropped here: the parts in
    (track, depth, ts) order, the levels one by one, `piece` positions of a level at a time, and beside them
    the parts in the slices' own order. (No copy that is not needed: on a run of 6.7M slices kept in memory,
    the build's peak above what it keeps was 730 MiB; written to files, ~60 bytes a slice.) `threads`: 2 builds
    the parts in the slices' order and the levels on two threads (numpy's passes run outside the GIL)."""
    track = slices.column("track_id").to_numpy().astype(np.int32, copy=False)
    ts = np.subtract(slices.column("ts_ns").to_numpy(), origin_ns, dtype=I64)
    dur = slices.column("dur_ns").to_numpy().astype(I64, copy=False)
    depth = slices.column("depth").to_numpy().astype(np.int32, copy=False)
    fold = fold_keys(slices, depth)  # None: no Python frames, every key is the depth
    sink.put("origin_ns", origin_ns)
    with ThreadPoolExecutor(threads, thread_name_prefix="index") if threads > 1 else nullcontext() as pool:
        args = (sink, tracks, counters, flows, instants, origin_ns, track, ts, dur, depth)
        beside = pool.submit(_parts_in_slice_order, *args) if pool is not None else None
        if beside is None:
            _parts_in_slice_order(*args)
        del args
        names, codes = _dictionary(slices.column("name")) if slices.num_rows else ([], np.zeros(0, np.int32))
        sink.put("names", names)
        del names
        keys = (ts, depth, track) if fold is None else (ts, fold, depth, track)
        order = np.lexsort(keys).astype(I64, copy=False) if len(ts) else np.zeros(0, I64)
        del keys
        ts_o = ts[order]
        del ts
        dur_o = dur[order]
        del dur
        name_o = codes[order]
        del codes
        depth_o = depth[order]
        del depth
        fold_o = depth_o if fold is None else fold[order]
        del fold
        g_track = track[order]
        sink.put("slice_track", track)
        del track
        sink.put("slice_id", order)
        del order
        if len(g_track):
            change = np.flatnonzero((np.diff(g_track) != 0) | (np.diff(depth_o) != 0) | (np.diff(fold_o) != 0)) + 1
            lo = np.concatenate(([0], change)).astype(I64)
            del change
        else:
            lo = np.zeros(0, I64)
        hi = np.append(lo[1:], len(g_track)).astype(I64) if len(g_track) else np.zeros(0, I64)
        sink.put("group_track", g_track[lo])
        del g_track
        group_depth = depth_o[lo]
        sink.put("group_fold", fold_o[lo])
        sink.put("fold", fold_o)
        sink.put("depth", depth_o)
        del depth_o, fold_o
        sink.put("group_depth", group_depth)
        sink.put("group_lo", lo)
        sink.put("group_hi", hi)
        group_of = np.repeat(np.arange(len(lo)), hi - lo)
        del lo, hi
        end_max = segmented_running_max(ts_o + dur_o, group_of, in_place=True)
        span = int(end_max.max(initial=0)) - int(ts_o.min(initial=0))
        sink.put("end_max", end_max)
        del end_max
        for level in iter_levels(ts_o, dur_o, name_o, group_of, group_depth, span, piece, pool):
            sink.level(level)
            del level  # (before the next is built)
        del group_of
        sink.put("ts", ts_o)
        sink.put("dur", dur_o)
        sink.put("name", name_o)
        if beside is not None:
            beside.result()


def _parts_in_slice_order(sink: IndexSink, tracks: pa.Table, counters: pa.Table, flows: pa.Table,
                          instants: pa.Table | None, origin_ns: int, track: np.ndarray, ts: np.ndarray,
                          dur: np.ndarray, depth: np.ndarray) -> None:
    """The tracks' kinds and lanes, the counters, instants and flows, and the track order (lod_budget)."""
    t_ids = tracks.column("track_id").to_pylist()
    sink.put("track_kind", dict(zip(t_ids, tracks.column("kind").to_pylist(), strict=True)))
    sink.put("track_lane", dict(zip(t_ids, tracks.column("lane").to_pylist(), strict=True)))
    sink.put("counter_ranges", _track_ranges(counters.column("track_id").to_numpy().astype(np.int32)))
    sink.put("counter_ts", counters.column("ts_ns").to_numpy().astype(I64) - origin_ns)
    sink.put("counter_value", counters.column("value").to_numpy().astype(np.float64))
    _instant_parts(sink, instants, origin_ns)
    _flow_parts(sink, flows, track, ts, dur)
    sink.put("order", build_track_order(tracks, track, ts, dur, depth))


def _instant_parts(sink: IndexSink, instants: pa.Table | None, origin_ns: int) -> None:
    if instants is None or instants.num_rows == 0:
        sink.put("instant_ranges", {})
        sink.put("instant_names", [])
        sink.put("instant_ts", np.zeros(0, I64))
        sink.put("instant_name", np.zeros(0, np.int32))
        return
    sink.put("instant_ranges", _track_ranges(instants.column("track_id").to_numpy().astype(np.int32)))
    sink.put("instant_ts", instants.column("ts_ns").to_numpy().astype(I64) - origin_ns)
    names, codes = _dictionary(instants.column("name"))
    sink.put("instant_names", names)
    sink.put("instant_name", codes)


def _track_ranges(track: np.ndarray) -> dict[int, tuple[int, int]]:
    """(first, end) row of each track in a table sorted by track."""
    if not len(track):
        return {}
    lo = np.concatenate(([0], np.flatnonzero(np.diff(track) != 0) + 1)).astype(I64)
    hi = np.append(lo[1:], len(track)).astype(I64)
    return {int(track[a]): (int(a), int(b)) for a, b in zip(lo, hi, strict=True)}


def _flow_parts(sink: IndexSink, flows: pa.Table, track: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
    """The flows, sorted by the start of their source slice, each array handed over as it is made."""
    flows = flows.cast(FLOWS)
    f_from = flows.column("from_slice").to_numpy().astype(I64, copy=False)
    f_to = flows.column("to_slice").to_numpy().astype(I64, copy=False)
    n = len(ts)
    ok = (f_from >= 0) & (f_from < n) & (f_to >= 0) & (f_to < n)
    kinds, kind_code = _dictionary(flows.column("kind")) if flows.num_rows else ([], np.zeros(0, np.int32))
    keep = np.flatnonzero(ok)
    del ok
    keep = keep[np.argsort(ts[f_from[keep]], kind="stable")]  # by the start of the source slice
    sink.put("flow_id", flows.column("flow_id").to_numpy().astype(I64, copy=False)[keep])
    sink.put("flow_kind", kinds)
    sink.put("flow_kind_code", kind_code[keep])
    del kind_code
    f_from, f_to = f_from[keep], f_to[keep]
    del keep
    sink.put("flow_from_track", track[f_from])
    sink.put("flow_to_track", track[f_to])
    from_ts, to_ts = ts[f_from], ts[f_to]
    wide = np.maximum(dur[f_from], dur[f_to])
    np.maximum(wide, np.abs(to_ts - from_ts) // 2, out=wide)
    for name, value in (("flow_from", f_from), ("flow_to", f_to), ("flow_from_ts", from_ts), ("flow_to_ts", to_ts),
                        ("flow_wide_ns", wide)):
        sink.put(name, value)


def compute_window(ix: TimelineIndex, start_ns: int, end_ns: int, width_px: int,
                   track_ids: list[int] | None = None, max_flows: int | None = None) -> dict[str, Any]:
    """The level-of-detail payload of one window (relative ns), see docs/API.md "Timeline window"."""
    ns_per_px = (end_ns - start_ns) / width_px
    wanted = sorted(ix.track_kind) if track_ids is None else [t for t in track_ids if t in ix.track_kind]
    out_tracks: dict[int, dict[str, Any]] = {}
    slice_tracks = [t for t in wanted if ix.track_kind[t] == "slice"]
    used_names: list[np.ndarray] = []
    for tid, payload, codes in _slice_windows(ix, slice_tracks, start_ns, end_ns, width_px, ns_per_px):
        out_tracks[tid] = payload
        used_names.append(codes)
    for tid in wanted:
        if ix.track_kind[tid] == "counter":
            out_tracks[tid] = {"track_id": tid, "kind": "counter",
                               "counter": _counter_window(ix, tid, start_ns, end_ns, width_px)}
        elif ix.track_kind[tid] == "instant":
            out_tracks[tid] = {"track_id": tid, "kind": "instant",
                               "instants": _instant_window(ix, tid, start_ns, end_ns, width_px)}
    names = _remap_names(ix, out_tracks, used_names)
    for payload in out_tracks.values():
        _listify(payload)
    flows, truncated = _flow_window(ix, wanted, start_ns, end_ns, ns_per_px, max_flows or max(1, width_px // 4))
    return {
        "origin_ns": ix.origin_ns, "start_ns": start_ns, "end_ns": end_ns, "width_px": width_px,
        "ns_per_px": ns_per_px, "names": names,
        "tracks": [out_tracks[t] for t in wanted if t in out_tracks],
        "flows": flows, "flows_truncated": truncated,
    }


def _window_items(ix: TimelineIndex, groups: np.ndarray, start_ns: int, end_ns: int,
                  ns_per_px: float) -> tuple[np.ndarray, np.ndarray, Items]:
    """Slices overlapping the window (positions, group slots) and pre-merged bins from a level when
    the raw candidates would be too many."""
    lo, hi = window_ranges(ix.ts, ix.end_max, ix.group_lo, ix.group_hi, groups, start_ns, end_ns)
    level = pick_level(ix.levels, ns_per_px) if int((hi - lo).sum()) > RAW_LIMIT else None
    if level is None:
        pos, slot = gather(lo, hi)
        return pos, slot, _no_items()
    lo, hi = window_ranges(level.long_ts, level.long_end_max, level.long_lo, level.long_hi, groups,
                           start_ns, end_ns)
    long_idx, slot = gather(lo, hi)
    b_lo, b_hi = window_ranges(level.bins.ts, level.bin_end_max, level.bin_lo, level.bin_hi, groups,
                               start_ns, end_ns)
    b_idx, b_slot = gather(b_lo, b_hi)
    bins = level.bins.take(b_idx)
    bins.slot = b_slot
    keep = bins.end >= start_ns
    return level.long_pos[long_idx], slot, bins if keep.all() else bins.take(np.flatnonzero(keep))


def _no_items() -> Items:
    e = np.zeros(0, I64)
    return Items(e, e, e, e, e, e, np.zeros(0, np.int32), np.zeros(0, np.int32))


def _slice_windows(ix: TimelineIndex, track_ids: list[int], start_ns: int, end_ns: int, width_px: int,
                   ns_per_px: float) -> list[tuple[int, dict[str, Any], np.ndarray]]:
    wanted = np.unique(np.asarray(track_ids, np.int32))  # group_track is sorted: a binary search per track
    groups, _ = gather(np.searchsorted(ix.group_track, wanted, side="left").astype(I64),
                       np.searchsorted(ix.group_track, wanted, side="right").astype(I64))
    pos, slot, bins = _window_items(ix, groups, start_ns, end_ns, ns_per_px)
    ts, dur = ix.ts[pos], ix.dur[pos]
    keep = ts + dur >= start_ns
    if not keep.all():
        pos, slot, ts, dur = pos[keep], slot[keep], ts[keep], dur[keep]
    wide = dur >= ns_per_px
    w_pos, w_slot = pos[wide], slot[wide]
    n = ~wide
    items = Items(slot=slot[n], ts=ts[n], end=ts[n] + dur[n], count=np.ones(int(n.sum()), I64), busy=dur[n],
                  longest=dur[n], name=ix.name[pos[n]], depth=ix.depth[pos[n]])
    merged = _merge_per_pixel(concat_items(items, bins) if len(bins) else items, start_ns, width_px, ns_per_px,
                              presorted=not len(bins))
    track_of_slot = ix.group_track[groups]
    group_fold = ix.group_fold[groups]  # per slot
    results = []
    for tid in track_ids:
        slots = np.flatnonzero(track_of_slot == tid)
        if not len(slots):
            results.append((tid, _empty_track(tid), np.zeros(0, np.int32)))
            continue
        a, b = int(slots[0]), int(slots[-1]) + 1
        wa, wb = np.searchsorted(w_slot, [a, b])
        ma, mb = np.searchsorted(merged.slot, [a, b])
        wp = w_pos[wa:wb]
        m = merged.take(np.arange(ma, mb))
        payload = {"track_id": tid, "kind": "slice",
                   "slices": {"id": ix.slice_id[wp], "ts": ix.ts[wp], "dur": ix.dur[wp],
                              "depth": ix.depth[wp], "fold": ix.fold[wp], "name": ix.name[wp]},
                   "merged": {"ts": m.ts, "dur": m.end - m.ts, "depth": m.depth, "fold": group_fold[m.slot],
                              "count": m.count, "busy_ns": m.busy, "name": m.name}}
        py_levels, op_levels = track_folds(group_fold[a:b])
        if py_levels:  # a with_stack track: how many rows its Python frames fold from, and its ops take
            payload["py_levels"], payload["op_levels"] = py_levels, op_levels
        results.append((tid, payload, np.concatenate((ix.name[wp], m.name))))
    return results


def _merge_per_pixel(items: Items, start_ns: int, width_px: int, ns_per_px: float, presorted: bool) -> Items:
    """Runs of sub-pixel items per (group slot, pixel column); each run becomes one merged item."""
    px = ((np.maximum(items.ts, start_ns) - start_ns) / ns_per_px).astype(I64)
    np.clip(px, 0, width_px - 1, out=px)
    key = items.slot * width_px + px
    if not presorted:  # raw slices and level bins are each ordered; together they need one sort
        order = np.lexsort((items.ts, key))
        items, key = items.take(order), key[order]
    first = np.flatnonzero(np.diff(key, prepend=-1)) if len(key) else np.zeros(0, I64)
    return reduce_runs(items, first)


def _empty_track(tid: int) -> dict[str, Any]:
    e: list[int] = []
    return {"track_id": tid, "kind": "slice",
            "slices": {"id": e, "ts": e, "dur": e, "depth": e, "fold": e, "name": e},
            "merged": {"ts": e, "dur": e, "depth": e, "fold": e, "count": e, "busy_ns": e, "name": e}}


def _remap_names(ix: TimelineIndex, tracks: dict[int, dict[str, Any]], used: list[np.ndarray]) -> list[str]:
    """Ship only the names this window uses; name columns become indexes into that short list."""
    codes = np.unique(np.concatenate(used)) if used else np.zeros(0, np.int32)
    for payload in tracks.values():
        if payload["kind"] != "slice":
            continue
        for part in ("slices", "merged"):
            col = payload[part]["name"]
            if len(col):
                payload[part]["name"] = np.searchsorted(codes, col)
    return [ix.names[c] for c in codes.tolist()]


def _listify(payload: dict[str, Any]) -> None:
    """numpy columns -> plain lists, in place, so the payload is JSON-ready."""
    for key, value in payload.items():
        if isinstance(value, dict):
            _listify(value)
        elif isinstance(value, np.ndarray):
            payload[key] = value.tolist()


def _counter_window(ix: TimelineIndex, tid: int, start_ns: int, end_ns: int, width_px: int) -> dict[str, Any]:
    a, b = ix.counter_ranges.get(tid, (0, 0))
    ts = ix.counter_ts[a:b]
    lo = max(int(np.searchsorted(ts, start_ns, side="right")) - 1, 0)  # the value in force at start
    hi = int(np.searchsorted(ts, end_ns, side="right"))
    ts, val = ts[lo:hi], ix.counter_value[a + lo:a + hi]
    if len(ts) <= 2 * width_px:
        return {"ts": ts, "value": val}
    px = np.clip(((ts - start_ns) * (width_px / (end_ns - start_ns))).astype(I64), 0, width_px - 1)
    first = np.flatnonzero(np.diff(px, prepend=-1))
    counts = np.diff(np.append(first, len(px)))
    bucket = np.repeat(np.arange(len(first)), counts)
    pick_min = _first_where(val == np.minimum.reduceat(val, first)[bucket], bucket, len(first))
    pick_max = _first_where(val == np.maximum.reduceat(val, first)[bucket], bucket, len(first))
    picks = np.unique(np.concatenate((pick_min, pick_max)))
    return {"ts": ts[picks], "value": val[picks]}


def _instant_window(ix: TimelineIndex, tid: int, start_ns: int, end_ns: int, width_px: int) -> dict[str, Any]:
    """Instants in the window, at most one per pixel column (the first), with how many it stands for."""
    a, b = ix.instant_ranges.get(tid, (0, 0))
    ts = ix.instant_ts[a:b]
    lo, hi = int(np.searchsorted(ts, start_ns, side="left")), int(np.searchsorted(ts, end_ns, side="right"))
    ts, codes = ts[lo:hi], ix.instant_name[a + lo:a + hi]
    px = ((ts - start_ns) * (width_px / max(1, end_ns - start_ns))).astype(I64)
    first = np.flatnonzero(np.diff(px, prepend=-1)) if len(px) else np.zeros(0, I64)
    count = np.diff(np.append(first, len(px))) if len(px) else np.zeros(0, I64)
    return {"ts": ts[first].tolist(), "name": [ix.instant_names[c] for c in codes[first].tolist()],
            "count": count.tolist()}


def _first_where(mask: np.ndarray, bucket: np.ndarray, n: int) -> np.ndarray:
    hits = np.flatnonzero(mask)
    _, first = np.unique(bucket[hits], return_index=True)
    result: np.ndarray = hits[first]
    assert len(result) == n
    return result


def _flow_window(ix: TimelineIndex, track_ids: list[int], start_ns: int, end_ns: int, ns_per_px: float,
                 limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Visible flows with an end in the window and on a wanted track, first `limit` by source time.
    Visible: one end slice is at least a pixel wide, or the arrow is at least two pixels long; arrows
    between sub-pixel slices would only blur the merged summaries."""
    lag = ix.flow_to_ts - ix.flow_from_ts  # flows are sorted by source time: search, then mask the range
    lo = int(np.searchsorted(ix.flow_from_ts, start_ns - int(lag.max(initial=0)), side="left"))
    hi = int(np.searchsorted(ix.flow_from_ts, end_ns - int(lag.min(initial=0)), side="right"))
    f_ts, t_ts = ix.flow_from_ts[lo:hi], ix.flow_to_ts[lo:hi]
    ends_in = ((f_ts >= start_ns) & (f_ts <= end_ns)) | ((t_ts >= start_ns) & (t_ts <= end_ns))
    selected = np.zeros(max(ix.order.id_bound, int(ix.flow_from_track.max(initial=-1)) + 1,
                                int(ix.flow_to_track.max(initial=-1)) + 1), bool)
    selected[[t for t in track_ids if t >= 0]] = True
    on_track = selected[ix.flow_from_track[lo:hi]] | selected[ix.flow_to_track[lo:hi]]
    hits = lo + np.flatnonzero(ends_in & on_track & (ix.flow_wide_ns[lo:hi] >= ns_per_px))
    truncated = len(hits) > limit
    hits = hits[:limit]
    cols = {
        "id": ix.flow_id[hits].tolist(), "from": ix.flow_from[hits].tolist(), "to": ix.flow_to[hits].tolist(),
        "kind": [ix.flow_kind[k] for k in ix.flow_kind_code[hits].tolist()],
        "from_track": ix.flow_from_track[hits].tolist(), "to_track": ix.flow_to_track[hits].tolist(),
        "from_ts": ix.flow_from_ts[hits].tolist(), "to_ts": ix.flow_to_ts[hits].tolist(),
    }
    keys = list(cols)
    return [dict(zip(keys, row, strict=True)) for row in zip(*cols.values(), strict=True)], truncated


def merge_windows(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One payload from two windows of the same range over different tracks (the run's and its device
    profiles'): b's name codes move past a's names; tracks and flows are appended."""
    shift = len(a["names"])
    for payload in b["tracks"]:
        if payload["kind"] == "slice":
            for part in ("slices", "merged"):
                payload[part]["name"] = [c + shift for c in payload[part]["name"]]
    return {**a, "names": a["names"] + b["names"], "tracks": a["tracks"] + b["tracks"],
            "flows": a["flows"] + b["flows"], "flows_truncated": a["flows_truncated"] or b["flows_truncated"]}


@dataclass
class WindowPart:
    """One index's tracks in a bounded window: those in scope (display order) and those asked for by id
    (`tracks=`; None: the first of the scope)."""

    index: TimelineIndex
    scope: np.ndarray
    asked: list[int] | None = None


def compute_bounded_window(parts: list[WindowPart], start_ns: int, end_ns: int, width_px: int,
                           height_px: int) -> dict[str, Any]:
    """A window bounded in total: the first tracks that fit `height_px` (asked ones first, parts in turn)
    in full, the rest of each part's scope as one summary row per lane (lod_budget), so a run of a
    million tracks costs what its window's visible tracks and pixels cost."""
    left = track_budget(height_px)
    windows: list[dict[str, Any]] = []
    summarised: list[SummaryPart] = []
    for part in parts:
        full = _full_tracks(part, left)
        left -= len(full)
        windows.append(compute_window(part.index, start_ns, end_ns, width_px, full))
        summarised.append(SummaryPart(part.index.order, part.scope, full))
    rows = compute_summaries(summarised, start_ns, end_ns, width_px)
    window: dict[str, Any] = reduce(merge_windows, windows)
    return {**window, "summaries": rows,
            "tracks_summarised": sum(r["tracks"] for r in rows)}


def _full_tracks(part: WindowPart, budget: int) -> list[int]:
    """The part's tracks sent in full: asked ones in scope (in the order asked, once each), else the
    scope's first, at most `budget`."""
    if budget <= 0:
        return []
    if part.asked is None:
        return [int(t) for t in part.scope[:budget].tolist()]
    in_scope = np.zeros(part.index.order.id_bound, bool)
    in_scope[part.scope] = True
    bound = len(in_scope)
    return [t for t in dict.fromkeys(part.asked) if 0 <= t < bound and in_scope[t]][:budget]
