"""Lane breakdown: busy/idle time per lane and per device, and the gaps between device executions.

Busy time is the union of a lane's (or device's) slice intervals, so nesting and parallel tracks
are not double counted. Each gap between device executions gets a cause guess from what the host
was doing: a synchronize call overlapping the gap ("sync"), the next execution's launch call
starting after the device went idle ("launch latency"), or a memory copy next ("data transfer").
Pure functions over a run's cached columns; no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
                      top: int = TOP_GAPS) -> dict[str, Any]:
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
    lanes = []
    for name in sorted({str(v) for v in lanes_of if v != "counter"}):
        mask = lane == name
        if not mask.any():
            continue
        a, b = union_segments(ts[mask], end[mask])
        busy = int((b - a).sum())
        lanes.append({"lane": name, "busy_ns": busy, "idle_ns": max(span - busy, 0),
                      "busy_pct": 100.0 * busy / span, "slices": int(mask.sum())})
    devices, gaps = _devices_and_gaps(slices, tracks, flows, ts, end, span)
    gaps.sort(key=lambda g: -g["dur_ns"])
    for g in gaps:
        g["start"] -= start_ns
        g["end"] -= start_ns
    return {"lanes": lanes, "devices": devices,
            "gaps": {"count": len(gaps), "total_ns": int(sum(g["dur_ns"] for g in gaps)), "largest": gaps[:top]}}


def _devices_and_gaps(slices: pa.Table, tracks: pa.Table, flows: pa.Table, ts: np.ndarray, end: np.ndarray,
                      span: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    hw = tracks.filter(pc.equal(tracks.column("lane"), "hardware"))
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
    tr = slices.column("track_id").to_numpy()
    names = slices.column("name")
    context = _HostContext(slices, flows)
    devices, gaps = [], []
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
        for gap_start, gap_end in zip(b[:-1].tolist(), a[1:].tolist(), strict=True):
            before = int(order[np.searchsorted(ts[order], gap_start, side="left") - 1])
            after = int(order[np.searchsorted(ts[order], gap_end, side="left")])
            gaps.append({"start": gap_start, "end": gap_end, "dur_ns": gap_end - gap_start, "device": dev,
                         "before": {"slice_id": before, "name": names[before].as_py()},
                         "after": {"slice_id": after, "name": names[after].as_py()},
                         "cause": context.cause(gap_start, gap_end, after)})
    return devices, gaps


class _HostContext:
    """What the host did around a gap: synchronize calls and the launch of the next execution."""

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
        self.launcher = dict(zip(flows.column("to_slice").to_numpy()[execute].tolist(),
                                 flows.column("from_slice").to_numpy()[execute].tolist(), strict=True))
        self.ts = ts
        self.cat = slices.column("cat")
        self.name = slices.column("name")

    def cause(self, gap_start: int, gap_end: int, after: int) -> str:
        i = int(np.searchsorted(self.sync_ts, gap_end, side="left"))
        if i > 0 and self.sync_end_max[i - 1] > gap_start:
            return "sync"
        launch = self.launcher.get(after)
        if launch is not None and int(self.ts[launch]) > gap_start:
            return "launch latency"
        cat = str(self.cat[after].as_py()).lower()
        if "memcpy" in cat or "memcpy" in str(self.name[after].as_py()).lower():
            return "data transfer"
        return "unknown"
