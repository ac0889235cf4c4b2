"""The memory page's data (`/runs/{id}/memory` and its twin `/api/runs/{id}/memory`): a run's `[memory]` instants
and framework slices read from the store, handed to explorer.analysis.memory, and the timeline figure. Times in
the result are ns from the run's start, as in every other page."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from typing_extensions import TypedDict

from explorer.analysis.alloc_snapshot import SnapshotDevice, compute_snapshot
from explorer.analysis.memory import (
    MemoryEvents,
    MemoryReport,
    PeakDelta,
    ThreadOps,
    compare_peaks,
    compute_memory,
    compute_owners,
    device_name,
)
from explorer.analysis.memory_categories import CategoryTimeline, compute_categories
from explorer.errors import BadRequest
from explorer.ingest.memory_timeline import CATEGORIES
from explorer.model.lanes import Lane
from explorer.model.shapes import RunJson
from explorer.pages import run_json
from explorer.store.runs import RunStore

MEMORY_NAME = "[memory]"
STEP_PREFIX = "ProfilerStep#"
OWNER_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                "#9c755f", "#bab0ac")


class MemoryResult(TypedDict):
    """GET /api/runs/{id}/memory: the report of the [memory] events, or `report: null` with the reason when the
    run has none; and the allocator snapshots' devices (explorer.analysis.alloc_snapshot), [] when none."""

    run_id: str
    report: MemoryReport | None
    reason: str
    snapshot: list[SnapshotDevice]
    categories: CategoryTimeline | None  # from export_memory_timeline output in the run; times from the run's start
    baseline: str  # ?baseline=RUN: the run compared against ("" none)
    compare: list[PeakDelta]  # each device's peak against the baseline's, by owner


@dataclass
class MemoryPage:
    """`/runs/{id}/memory`; twin `/api/runs/{id}/memory`."""

    run: RunJson
    memory: MemoryResult
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    twin: str = ""


NO_EVENTS = ("this run has no [memory] events: profile with torch.profiler(profile_memory=True) (runs ingested "
             "before memory events were kept need ingesting again)")


def compute_run_memory(store: RunStore, run_id: str, baseline: str = "") -> MemoryResult:
    """The memory report of a ready run, from its stored [memory] instants and framework slices (and its allocator
    snapshots and export_memory_timeline files); with a baseline run, each peak against the baseline's."""
    result = _run_memory(store, run_id)
    if baseline:
        other = _run_memory(store, baseline)["report"]
        if result["report"] is None or other is None:
            raise BadRequest(f"memory compare needs [memory] events in both runs ({run_id}, {baseline})")
        result["baseline"], result["compare"] = baseline, compare_peaks(result["report"], other)
    return result


def _run_memory(store: RunStore, run_id: str) -> MemoryResult:
    rec = store.require_ready(run_id)
    origin = rec.summary.start_ns
    tracks = store.table(run_id, "tracks")
    thread_of_track = _thread_keys(tracks)
    snapshot = _snapshot(store, run_id)
    categories = None
    if store.table_path(run_id, "memory_categories").exists():
        # (the profiler's clock: from the run's start when its changes fall in the run, else from the first change)
        table = store.table(run_id, "memory_categories")
        categories = compute_categories(table, origin if _within_run(table, rec.summary.start_ns,
                                                                     rec.summary.end_ns) else None, CATEGORIES)
    read = _memory_events(store.table(run_id, "instants"), thread_of_track, origin)
    if read is None:
        return MemoryResult(run_id=run_id, report=None, reason=NO_EVENTS, snapshot=snapshot, categories=categories,
                            baseline="", compare=[])
    keys, events = read
    slices = store.table(run_id, "slices")
    ops, steps = _thread_ops(slices, thread_of_track, keys, origin)
    report = compute_memory(events, compute_owners(events, ops), steps)
    return MemoryResult(run_id=run_id, report=report, reason="", snapshot=snapshot, categories=categories,
                        baseline="", compare=[])


def _within_run(table: pa.Table, start_ns: int, end_ns: int) -> bool:
    ts = table.column("ts_ns").to_numpy()
    timed = ts[ts >= 0]
    return end_ns > start_ns and bool(len(timed)) and start_ns <= int(timed.min()) <= end_ns


def _snapshot(store: RunStore, run_id: str) -> list[SnapshotDevice]:
    """The run's allocator snapshot report; [] for a run without one (older runs have no such tables)."""
    if not store.table_path(run_id, "alloc_trace").exists():
        return []
    return compute_snapshot(store.table(run_id, "alloc_trace"), store.table(run_id, "alloc_blocks"))


def run_peak_memory(store: RunStore, run_id: str) -> int | None:
    """The run's peak memory for the gate (`check --metric peak_memory`): the highest Total Allocated of any
    device; None without [memory] events."""
    report = compute_run_memory(store, run_id)["report"]
    return None if report is None else max(p["bytes"] for p in report["peaks"])


def build_memory_page(store: RunStore, run_id: str, baseline: str = "") -> MemoryPage:
    rec = store.require_ready(run_id)
    data = compute_run_memory(store, run_id, baseline)
    figures = {f"snapshot-{i}": make_snapshot_figure(d) for i, d in enumerate(data["snapshot"])}
    if data["categories"] is not None:
        figures["categories"] = make_categories_figure(data["categories"])
    if data["report"] is not None:
        peaks = {p["device"]: p["ts_ns"] for p in data["report"]["peaks"]}
        figures |= {f"timeline-{i}": make_memory_figure(t, peaks.get(t["device"]))
                    for i, t in enumerate(data["report"]["timelines"])}
    query = f"?{urlencode({'baseline': baseline})}" if baseline else ""
    return MemoryPage(run_json(rec), data, figures, f"/api/runs/{run_id}/memory{query}")


def _thread_keys(tracks: pa.Table) -> dict[int, tuple[str, str, str]]:
    """track id -> its host thread (instance, process, thread)."""
    cols = [tracks.column(c).to_pylist() for c in ("track_id", "instance", "process", "thread")]
    return {tid: (inst, proc, th) for tid, inst, proc, th in zip(*cols, strict=True)}


def _memory_events(instants: pa.Table, thread_of_track: dict[int, tuple[str, str, str]],
                   origin: int) -> tuple[list[tuple[str, str, str]], MemoryEvents] | None:
    """The run's [memory] instants with an address and a byte count, in time order (ties: the stored order)."""
    mem = instants.filter(pc.equal(instants.column("name"), MEMORY_NAME))
    if not mem.num_rows:
        return None
    rows: list[tuple[int, int, int, int, int, int, int, str]] = []
    keys: dict[tuple[str, str, str], int] = {}
    for pos, (track, ts, raw) in enumerate(zip(mem.column("track_id").to_pylist(), mem.column("ts_ns").to_pylist(),
                                               mem.column("args").to_pylist(), strict=True)):
        args = _args(raw)
        nbytes, addr = args.get("Bytes"), args.get("Addr")
        if not isinstance(nbytes, int) or not isinstance(addr, int) or not _is_int(nbytes) or not _is_int(addr):
            continue
        thread = keys.setdefault(thread_of_track[track], len(keys))
        rows.append((ts - origin, pos, thread, addr, nbytes, _int(args.get("Total Allocated")),
                     _int(args.get("Total Reserved")),
                     device_name(args.get("Device Type", 0), args.get("Device Id", -1))))
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1]))
    cols = list(zip(*rows, strict=True))
    events = MemoryEvents(ts_ns=np.asarray(cols[0], np.int64), thread=np.asarray(cols[2], np.int64),
                          addr=list(cols[3]), nbytes=np.asarray(cols[4], np.int64),
                          allocated=np.asarray(cols[5], np.int64), reserved=np.asarray(cols[6], np.int64),
                          device=list(cols[7]))
    return list(keys), events


def _args(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) < value < 2**63


def _int(value: object) -> int:
    return value if isinstance(value, int) and _is_int(value) else 0


def _thread_ops(slices: pa.Table, thread_of_track: dict[int, tuple[str, str, str]], keys: list[tuple[str, str, str]],
                origin: int) -> tuple[list[ThreadOps | None], list[tuple[str, int, int]]]:
    """Per memory thread (keys' order) its framework slices; and the ProfilerSteps (name, start, end)."""
    host = slices.filter(pc.equal(slices.column("lane"), Lane.FRAMEWORK.value))
    cols = {c: host.column(c).to_pylist() for c in ("track_id", "ts_ns", "dur_ns", "name", "cat")}
    index = {key: i for i, key in enumerate(keys)}
    per: list[list[tuple[int, int, str, str]]] = [[] for _ in keys]
    steps: list[tuple[str, int, int]] = []
    for track, ts, dur, name, cat in zip(*cols.values(), strict=True):
        start = ts - origin
        if name.startswith(STEP_PREFIX):
            steps.append((name, start, start + dur))
        if (i := index.get(thread_of_track[track])) is not None:
            per[i].append((start, start + dur, name, cat))
    ops: list[ThreadOps | None] = []
    for rows in per:
        if not rows:
            ops.append(None)
            continue
        c = list(zip(*rows, strict=True))
        ops.append(ThreadOps(np.asarray(c[0], np.int64), np.asarray(c[1], np.int64), list(c[2]), list(c[3])))
    return ops, sorted(set(steps), key=lambda s: s[1])


def make_memory_figure(timeline: Any, peak_ns: int | None = None) -> dict[str, Any]:
    """Live bytes of one device over time, stacked by owner op, with the allocated and reserved totals as lines
    (MiB against ms from the run's start) and the peak marked."""
    x = [t / 1e6 for t in timeline["ts_ns"]]
    mib = 2.0**20
    data: list[dict[str, Any]] = []
    for k, (owner, values) in enumerate(zip(timeline["owners"], timeline["stacked"], strict=True)):
        data.append({"type": "scatter", "mode": "lines", "stackgroup": "owners", "line": {"width": 0, "shape": "hv"},
                     "name": html.escape(owner[:60], quote=False), "x": x, "y": [v / mib for v in values],
                     "fillcolor": OWNER_COLORS[k % len(OWNER_COLORS)],
                     "hovertemplate": "%{fullData.name}: %{y:.2f} MiB<extra></extra>"})
    for name, key, dash in (("allocated (total)", "allocated", "solid"), ("reserved (total)", "reserved", "dot")):
        if key == "reserved" and not any(timeline[key]):
            continue  # (the CPU allocator reserves nothing apart)
        data.append({"type": "scatter", "mode": "lines", "name": name, "x": x,
                     "y": [v / mib for v in timeline[key]], "line": {"color": "#24292f", "width": 1.2,
                                                                     "dash": dash, "shape": "hv"},
                     "hovertemplate": f"{name}: %{{y:.2f}} MiB<extra></extra>"})
    layout = {"title": {"text": f"Memory over time · {html.escape(timeline['device'])}", "x": 0, "font": {"size": 13}},
              "height": 340, "margin": {"l": 8, "r": 16, "t": 32, "b": 36}, "showlegend": True,
              "legend": {"orientation": "h", "y": -0.2}, "paper_bgcolor": "rgba(0,0,0,0)",
              "plot_bgcolor": "rgba(0,0,0,0)", "hovermode": "x unified",
              "xaxis": {"title": {"text": "ms from the run's start"}, "gridcolor": "#e6e8eb", "automargin": True},
              "yaxis": {"title": {"text": "MiB"}, "gridcolor": "#e6e8eb", "automargin": True, "rangemode": "tozero"}}
    if peak_ns is not None:
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": peak_ns / 1e6, "x1": peak_ns / 1e6,
                             "y0": 0, "y1": 1, "line": {"color": "#e15759", "width": 1, "dash": "dash"}}]
        layout["annotations"] = [{"x": peak_ns / 1e6, "y": 1, "xref": "x", "yref": "paper", "text": "peak",
                                  "showarrow": False, "yanchor": "bottom", "font": {"color": "#e15759"}}]
    return {"data": data, "layout": layout}


def make_snapshot_figure(dev: SnapshotDevice) -> dict[str, Any]:
    """An allocator snapshot's active and reserved memory over its trace (MiB against the trace's own time, or
    the action's position when times were not recorded), the gap between them being fragmentation."""
    timed = dev["x_kind"] == "time_us"
    x = [(v - dev["x"][0]) / 1e3 for v in dev["x"]] if timed and dev["x"] else dev["x"]
    mib = 2.0**20
    data = [{"type": "scatter", "mode": "lines", "name": name, "x": x, "y": [v / mib for v in dev[key]],  # type: ignore[literal-required]
             "line": {"color": color, "width": 1.4, "shape": "hv"}, **extra,
             "hovertemplate": f"{name}: %{{y:.2f}} MiB<extra></extra>"}
            for name, key, color, extra in (("reserved", "reserved", "#9aa5b1", {}),
                                            ("active", "active", "#4e79a7", {"fill": "tozeroy"}))]
    return {"data": data, "layout": {
        "title": {"text": f"Allocator snapshot · device {dev['device']}: active and reserved", "x": 0,
                  "font": {"size": 13}},
        "height": 300, "margin": {"l": 8, "r": 16, "t": 32, "b": 36}, "showlegend": True,
        "legend": {"orientation": "h", "y": -0.25}, "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "x unified",
        "xaxis": {"title": {"text": "ms from the first action" if timed else "action #"}, "gridcolor": "#e6e8eb",
                  "automargin": True},
        "yaxis": {"title": {"text": "MiB"}, "gridcolor": "#e6e8eb", "rangemode": "tozero", "automargin": True}}}


CATEGORY_COLORS = {"parameter": "#2f7d32", "optimizer_state": "#d4a017", "input": "#333333", "temporary": "#9370db",
                   "activation": "#e15759", "gradient": "#1f4e9c", "autograd_detail": "#4169e1", "unknown": "#9aa5b1"}


def make_categories_figure(cat: CategoryTimeline) -> dict[str, Any]:
    """Memory by category over time, stacked (export_memory_timeline's own categories and colours)."""
    x = [t / 1e6 for t in cat["ts_ns"]]
    data = [{"type": "scatter", "mode": "lines", "stackgroup": "cats", "name": name, "x": x,
             "y": [v / 2.0**20 for v in values], "line": {"width": 0, "shape": "hv"},
             "fillcolor": CATEGORY_COLORS.get(name, "#bab0ac"),
             "hovertemplate": f"{name}: %{{y:.2f}} MiB<extra></extra>"}
            for name, values in zip(cat["categories"], cat["stacked"], strict=True)]
    return {"data": data, "layout": {
        "title": {"text": "Memory by category (export_memory_timeline)", "x": 0, "font": {"size": 13}},
        "height": 300, "margin": {"l": 8, "r": 16, "t": 32, "b": 36}, "showlegend": True,
        "legend": {"orientation": "h", "y": -0.25}, "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "x unified", "xaxis": {"title": {"text": "ms"}, "gridcolor": "#e6e8eb", "automargin": True},
        "yaxis": {"title": {"text": "MiB"}, "gridcolor": "#e6e8eb", "rangemode": "tozero", "automargin": True}}}
