"""Lane breakdown: busy/idle time per lane and per device, and the gaps between device executions.

Busy time is the union of a lane's (or device's) slice intervals, so nesting and parallel tracks
are not double counted. On the hardware lane only executions (`device_time` slices) count:
annotations drawn on a device stream (`gpu_user_annotation`, e.g. ProfilerStep#6) are not busy time. Each gap between device executions gets a cause guess from what the host
was doing: a synchronize call overlapping the gap ("sync"), the next execution's launch call
starting after the device went idle ("launch latency"), or a memory copy next ("data transfer").
Pure functions over a run's cached columns; no I/O.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.model.lanes import Lane
from explorer.model.shapes import Breakdown, DeviceBusy, Gap, LaneBusy

I64 = np.int64
TOP_GAPS = 20


def union_segments(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint [start, end) segments covering the given intervals (any order)."""
    if not len(ts):
        return np.zeros(0, I64), np.zeros(0, I64)
    order = np.argsort(ts, kind="stable")
    ts, end = ts[order], np.maximum.accumulate(end[order])
    new = np.empty(len(ts), bool)
    new[0] = True
    new[1:] = ts[1:] > end[:-1]
    starts = np.flatnonzero(new)
    seg_end = end[np.append(starts[1:] - 1, len(ts) - 1)]
    return ts[starts], seg_end


def compute_breakdown(slices: pa.Table, tracks: pa.Table, flows: pa.Table, start_ns: int, end_ns: int,
                      top: int = TOP_GAPS) -> Breakdown:
    """Busy/idle per lane and device plus device gaps; gap times are relative to `start_ns`."""
    span = max(end_ns - start_ns, 1)
    track_ids = tracks.column("track_id").to_numpy()
    lanes_of = np.asarray(tracks.column("lane").to_pylist(), dtype=object)
    lane_by_track = np.empty(int(track_ids.max(initial=-1)) + 1, dtype=object)
    lane_by_track[track_ids] = lanes_of
    tr = slices.column("track_id").to_numpy()
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    end = ts + slices.column("dur_ns").to_numpy().astype(I64)
    lane = lane_by_track[tr] if len(tr) else np.zeros(0, object)
    lanes = _lane_rows(lane, lanes_of, slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool),
                       ts, end, span)
    devices, gaps = _devices_and_gaps(slices, tracks, flows, ts, end, span)
    largest = np.argsort(-gaps["dur"], kind="stable")[:top]
    names = slices.column("name")
    rows: list[Gap] = [{"start": int(gaps["start"][i]) - start_ns, "end": int(gaps["end"][i]) - start_ns,
             "dur_ns": int(gaps["dur"][i]), "device": str(gaps["device"][i]),
             "before": {"slice_id": int(gaps["before"][i]), "name": names[int(gaps["before"][i])].as_py()},
             "after": {"slice_id": int(gaps["after"][i]), "name": names[int(gaps["after"][i])].as_py()},
             "cause": str(gaps["cause"][i])} for i in largest.tolist()]
    return {"lanes": lanes, "devices": devices,
            "gaps": {"count": len(gaps["dur"]), "total_ns": int(gaps["dur"].sum()), "largest": rows}}


def _lane_rows(lane: np.ndarray, lanes_of: np.ndarray, devtime: np.ndarray, ts: np.ndarray, end: np.ndarray,
               span: int) -> list[LaneBusy]:
    """Busy/idle per lane. The hardware lane counts executions only; `excluded_slices` says how many
    of its slices (annotations) were left out."""
    lanes: list[LaneBusy] = []
    for name in sorted({str(v) for v in lanes_of if v != Lane.COUNTER}):
        in_lane = lane == name
        mask = in_lane & devtime if name == Lane.HARDWARE else in_lane
        if not in_lane.any():
            continue
        a, b = union_segments(ts[mask], end[mask])
        busy = int((b - a).sum())
        lanes.append({"lane": name, "busy_ns": busy, "idle_ns": max(span - busy, 0),
                      "busy_pct": 100.0 * busy / span, "slices": int(mask.sum()),
                      "excluded_slices": int(in_lane.sum() - mask.sum())})
    return lanes


def _devices_and_gaps(slices: pa.Table, tracks: pa.Table, flows: pa.Table, ts: np.ndarray, end: np.ndarray,
                      span: int) -> tuple[list[DeviceBusy], dict[str, np.ndarray]]:
    """Per device busy time, and every gap between its executions as columns (start, end, dur,
    device, before, after, cause)."""
    hw = tracks.filter(pc.equal(tracks.column("lane"), Lane.HARDWARE))
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
    tr = slices.column("track_id").to_numpy()
    context = _HostContext(slices, flows)
    devices: list[DeviceBusy] = []
    parts: list[dict[str, np.ndarray]] = []
    groups: dict[str, list[int]] = {}
    for tid, dev, label in zip(hw.column("track_id").to_pylist(), hw.column("device").to_pylist(),
                               hw.column("label").to_pylist(), strict=True):
        groups.setdefault(dev or label, []).append(tid)
    for dev, tids in groups.items():
        idx = np.flatnonzero(np.isin(tr, tids) & devtime)
        if not len(idx):
            continue
        a, b = union_segments(ts[idx], end[idx])
        busy = int((b - a).sum())
        devices.append({"device": dev, "track_id": tids[0], "busy_ns": busy, "busy_pct": 100.0 * busy / span,
                        "executions": len(idx)})
        order = idx[np.argsort(ts[idx], kind="stable")]
        order_ts = ts[order]
        g_start, g_end = b[:-1], a[1:]
        after = order[np.minimum(np.searchsorted(order_ts, g_end, side="left"), len(order) - 1)]
        before = order[np.maximum(np.searchsorted(order_ts, g_start, side="left") - 1, 0)]
        parts.append({"start": g_start, "end": g_end, "dur": g_end - g_start,
                      "device": np.full(len(g_start), dev, dtype=object), "before": before, "after": after,
                      "cause": context.causes(g_start, g_end, after)})
    keys = ("start", "end", "dur", "device", "before", "after", "cause")
    if not parts:
        return devices, {k: np.zeros(0, object if k in ("device", "cause") else I64) for k in keys}
    return devices, {k: np.concatenate([p[k] for p in parts]) for k in keys}


class _HostContext:
    """What the host did around gaps: synchronize calls, and when each execution was launched."""

    def __init__(self, slices: pa.Table, flows: pa.Table) -> None:
        is_sync = pc.or_(pc.equal(slices.column("cat"), "cuda_sync"),
                         pc.match_substring(slices.column("name"), "Synchronize"))
        sync = np.flatnonzero(is_sync.to_numpy(zero_copy_only=False).astype(bool))
        ts = slices.column("ts_ns").to_numpy()
        order = sync[np.argsort(ts[sync], kind="stable")]
        self.sync_ts = ts[order]
        self.sync_end_max = np.maximum.accumulate(self.sync_ts + slices.column("dur_ns").to_numpy()[order]) \
            if len(order) else np.zeros(0, I64)
        execute = pc.equal(flows.column("kind"), "execute").to_numpy(zero_copy_only=False).astype(bool)
        self.launch_ts = np.full(slices.num_rows, np.iinfo(I64).min, dtype=I64)
        to = flows.column("to_slice").to_numpy()[execute]
        frm = flows.column("from_slice").to_numpy()[execute]
        ok = (to >= 0) & (to < slices.num_rows) & (frm >= 0) & (frm < slices.num_rows)
        self.launch_ts[to[ok]] = ts[frm[ok]]
        is_copy = pc.or_(pc.match_substring(slices.column("cat"), "memcpy", ignore_case=True),
                         pc.match_substring(slices.column("name"), "memcpy", ignore_case=True))
        self.is_copy = np.asarray(pc.fill_null(is_copy, False).to_numpy(zero_copy_only=False), dtype=bool)

    def causes(self, gap_start: np.ndarray, gap_end: np.ndarray, after: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.sync_ts, gap_end, side="left")
        if len(self.sync_ts):
            sync = (i > 0) & (self.sync_end_max[np.maximum(i - 1, 0)] > gap_start)
        else:
            sync = np.zeros(len(gap_start), bool)
        launch = self.launch_ts[after] > gap_start
        out: np.ndarray = np.select([sync, launch, self.is_copy[after]], ["sync", "launch latency", "data transfer"],
                                    "unknown").astype(object)
        return out
