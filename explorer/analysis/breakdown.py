"""Lane breakdown: busy/idle time per lane and per device (the union of slice intervals, never a sum; only
executions count on the hardware lane), and the gaps between device executions explained by host evidence.
Pure functions over a run's cached columns; no I/O."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.gap_evidence import HostEvidence, timeline_window
from explorer.analysis.intervals import union_segments
from explorer.model.lanes import Lane
from explorer.model.markers import marker_mask
from explorer.model.ranks import rank_by_track
from explorer.model.shapes import Breakdown, DeviceBusy, Gap, GraphLaunches, LaneBusy

I64 = np.int64
TOP_GAPS = 20
# Shorter gaps are counted but not listed with a cause: below a microsecond no host activity can have
# caused or filled them (a launch call alone takes microseconds on the host: cudaLaunchKernel's ~2-5 us),
# it is the device's own switch between back-to-back executions, and Kineto's JSON times are whole ns
# from microseconds with 3 decimals, so a 1 ns gap is rounding as often as it is time.
MIN_GAP_NS = 1_000
# Host calls that launch a whole captured graph (CUDA runtime and driver, their per-thread-stream
# variants, HIP). A graph captured before the profiler first ran shows no kernels in a Kineto trace
# (pytorch/pytorch#100441: torch.profiler._utils._init_for_cuda_graphs() before capture is the workaround).
GRAPH_LAUNCH_NAMES = frozenset({"cudaGraphLaunch", "cudaGraphLaunch_ptsz", "cuGraphLaunch", "cuGraphLaunch_ptsz",
                                "hipGraphLaunch"})
GRAPH_HIDDEN_BUSY_PCT = 1  # below it, with graph launches lacking device work, the busy % is not shown
_OVERLAP_SUFFIX = " (overlap "


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
    markers = np.zeros(len(tr), bool)  # the markers' categories are all of lane `other` (explorer.model.lanes)
    other = np.flatnonzero(lane == Lane.OTHER)
    if len(other):
        markers[other] = marker_mask("slice", slices.column("cat").take(other), slices.column("name").take(other))
    lanes = _lane_rows(lane, lanes_of, slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool),
                       ts, end, span, markers)
    devices, gaps = _devices_and_gaps(slices, tracks, ts, end, span)
    listed = np.flatnonzero(gaps["dur"] >= MIN_GAP_NS)
    largest = listed[np.argsort(-gaps["dur"][listed], kind="stable")[:top]]
    rows: list[Gap] = []
    if len(largest):
        evidence = HostEvidence(slices, tracks, flows)
        ranks = rank_by_track(tracks)
        rows = [_gap_row(slices, gaps, int(i), start_ns, end_ns, evidence, ranks) for i in largest.tolist()]
    short = gaps["dur"] < MIN_GAP_NS
    return {"lanes": lanes, "devices": devices,
            "gaps": {"count": len(gaps["dur"]), "total_ns": int(gaps["dur"].sum()), "largest": rows,
                     "min_gap_ns": MIN_GAP_NS, "short_count": int(short.sum()),
                     "short_ns": int(gaps["dur"][short].sum())},
            "graphs": graph_launches(slices, flows, np.flatnonzero(lane == Lane.RUNTIME),
                                     max((d["busy_ns"] for d in devices), default=0), span)}


def graph_launches(slices: pa.Table, flows: pa.Table, runtime: np.ndarray, busy_ns: int, span: int) -> GraphLaunches:
    """The graph launches (GRAPH_LAUNCH_NAMES) and those with no device execution of theirs in the trace: none
    sharing their correlation id, none at the end of an execute flow from them (`runtime`: the runtime lane's
    slice ids, where launch calls are). `hides_device_work`: there
    are such launches and no device is busy GRAPH_HIDDEN_BUSY_PCT of the span (`busy_ns`, the busiest's): a
    busy % would be a reading of what the profiler missed, not of the device."""
    names = slices.column("name").take(runtime)
    is_launch = np.asarray(pc.fill_null(pc.is_in(names, pa.array(sorted(GRAPH_LAUNCH_NAMES))), False)
                           .to_numpy(zero_copy_only=False), dtype=bool)
    launch = runtime[is_launch]
    if not len(launch):
        return {"launches": 0, "without_device_work": 0, "hides_device_work": False}
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
    corr = slices.column("correlation").to_numpy(zero_copy_only=False)
    executed = np.unique(corr[devtime & (corr > 0)])
    seen = np.isin(corr[launch], executed) & (corr[launch] > 0)
    if flows.num_rows:
        frm, to = flows.column("from_slice").to_numpy(), flows.column("to_slice").to_numpy()
        ok = (to >= 0) & (to < len(devtime))
        seen |= np.isin(launch, frm[ok][devtime[to[ok]]])
    missing = int((~seen).sum())
    return {"launches": len(launch), "without_device_work": missing,
            "hides_device_work": missing > 0 and busy_ns * 100 < GRAPH_HIDDEN_BUSY_PCT * span}


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
               span: int, markers: np.ndarray) -> list[LaneBusy]:
    """Busy/idle per lane. The hardware lane counts executions only, no lane counts profiler markers;
    `excluded_slices` says how many of a lane's slices (annotations, markers) were left out."""
    lanes: list[LaneBusy] = []
    for name in sorted({str(v) for v in lanes_of if v != Lane.COUNTER}):
        in_lane = lane == name
        mask = (in_lane & devtime if name == Lane.HARDWARE else in_lane) & ~markers
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
    groups = device_groups(hw)
    for dev, tids in groups.items():
        idx = np.flatnonzero(np.isin(tr, tids) & devtime)
        if not len(idx):
            continue
        a, b = union_segments(ts[idx], end[idx])
        busy = int((b - a).sum())
        devices.append({"device": dev, "track_id": tids[0], "busy_ns": busy, "busy_pct": 100.0 * busy / span,
                        "idle_ns": max(span - busy, 0), "executions": len(idx)})
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


def device_groups(hw: pa.Table) -> dict[str, list[int]]:
    """The hardware tracks' ids per device: its `device` name, else (a run stored before tracks of unnamed
    devices had one) its label without the ` (overlap n)` of a sub-row; per rank, named `rank r · ` first
    when the tracks are of several ranks."""
    cols = {k: hw.column(k).to_pylist() for k in ("track_id", "device", "label")}
    ranks = hw.column("rank").to_pylist() if "rank" in hw.column_names else [-1] * hw.num_rows
    several = len(set(ranks)) > 1
    groups: dict[str, list[int]] = {}
    for tid, dev, label, rank in zip(cols["track_id"], cols["device"], cols["label"], ranks, strict=True):
        name = dev or str(label).split(_OVERLAP_SUFFIX)[0]
        if several and rank >= 0 and not name.startswith(f"rank {rank} · "):
            name = f"rank {rank} · {name}"
        groups.setdefault(name, []).append(tid)
    return groups
