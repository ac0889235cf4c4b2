"""Lane breakdown: busy/idle time per lane and per device, and the gaps between device executions.

Busy time is the union of a lane's (or device's) slice intervals, so nesting and parallel tracks
are not double counted. On the hardware lane only executions (`device_time` slices) count:
annotations drawn on a device stream (`gpu_user_annotation`, e.g. ProfilerStep#6) are not busy time.
The largest gaps are explained by the host evidence over them (explorer.analysis.gap_evidence: host
activity, cause rule, timeline link). Pure functions over a run's cached columns; no I/O.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.gap_evidence import HostEvidence, timeline_window
from explorer.analysis.intervals import union_segments
from explorer.model.lanes import Lane
from explorer.model.ranks import rank_by_track
from explorer.model.shapes import Breakdown, DeviceBusy, Gap, LaneBusy

I64 = np.int64
TOP_GAPS = 20


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
    devices, gaps = _devices_and_gaps(slices, tracks, ts, end, span)
    largest = np.argsort(-gaps["dur"], kind="stable")[:top]
    rows: list[Gap] = []
    if len(largest):
        evidence = HostEvidence(slices, tracks, flows)
        ranks = rank_by_track(tracks)
        rows = [_gap_row(slices, gaps, int(i), start_ns, end_ns, evidence, ranks) for i in largest.tolist()]
    return {"lanes": lanes, "devices": devices,
            "gaps": {"count": len(gaps["dur"]), "total_ns": int(gaps["dur"].sum()), "largest": rows}}


def _gap_row(slices: pa.Table, gaps: dict[str, np.ndarray], i: int, start_ns: int, end_ns: int,
             evidence: HostEvidence, ranks: dict[int, int]) -> Gap:
    """Gap `i` as the API shows it: relative times, its device's rank (None unknown), its neighbours, the
    host evidence and its timeline link."""
    g_start, g_end, after, before = (int(gaps[k][i]) for k in ("start", "end", "after", "before"))
    why = evidence.explain(g_start, g_end, after)
    names = slices.column("name")
    return {"start": g_start - start_ns, "end": g_end - start_ns, "dur_ns": g_end - g_start,
            "device": str(gaps["device"][i]), "rank": ranks.get(int(slices.column("track_id")[after].as_py())),
            "before": {"slice_id": before, "name": names[before].as_py()},
            "after": {"slice_id": after, "name": names[after].as_py()},
            "cause": why.cause, "cause_detail": why.cause_detail, "host_activity": why.host_activity,
            "top_activity": why.top_activity,
            "timeline": timeline_window(g_start - start_ns, g_end - start_ns, end_ns - start_ns)}


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


def _devices_and_gaps(slices: pa.Table, tracks: pa.Table, ts: np.ndarray, end: np.ndarray,
                      span: int) -> tuple[list[DeviceBusy], dict[str, np.ndarray]]:
    """Per device busy time, and every gap between its executions as columns (start, end, dur,
    device, before, after)."""
    hw = tracks.filter(pc.equal(tracks.column("lane"), Lane.HARDWARE))
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
    tr = slices.column("track_id").to_numpy()
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
                      "device": np.full(len(g_start), dev, dtype=object), "before": before, "after": after})
    keys = ("start", "end", "dur", "device", "before", "after")
    if not parts:
        return devices, {k: np.zeros(0, object if k == "device" else I64) for k in keys}
    return devices, {k: np.concatenate([p[k] for p in parts]) for k in keys}
