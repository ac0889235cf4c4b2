"""The memory page's data (`/runs/{id}/memory` and its twin `/api/runs/{id}/memory`): a run's `[memory]` instants
and framework slices read from the store, handed to explorer.analysis.memory, and the timeline figure. Times in
the result are ns from the run's start, as in every other page."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from typing_extensions import TypedDict

from explorer.analysis.alloc_snapshot import SnapshotDevice, compute_snapshot
from explorer.analysis.hbm import HbmUsage, compute_hbm, is_hbm_series
from explorer.analysis.memory import (
    MemoryReport,
    PeakDelta,
    compare_peaks,
    compute_memory,
    compute_owners,
)
from explorer.analysis.memory_categories import CategoryTimeline, compute_categories
from explorer.errors import BadRequest
from explorer.ingest.memory_timeline import CATEGORIES
from explorer.model.shapes import RunJson
from explorer.pages import run_json
from explorer.store.runs import RunStore
from explorer.views.memory_events import NoAddresses, memory_events, thread_keys, thread_ops

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
    hbm: list[HbmUsage]  # Neuron HBM by usage type (the system profile's counters), [] when none
    baseline: str  # ?baseline=RUN: the run compared against ("" none)
    compare: list[PeakDelta]  # each device's peak against the baseline's, by owner


@dataclass
class MemoryPage:
    """`/runs/{id}/memory`; twin `/api/runs/{id}/memory`."""

    run: RunJson
    memory: MemoryResult
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    twin: str = ""


NO_ADDRESSES = ("this run's {count:,} [memory] events carry no Addr (older profilers wrote only Bytes): "
                "allocations cannot be paired with their frees; profile again with a current PyTorch")
NO_EVENTS = ("this run has no [memory] events: profile with torch.profiler(profile_memory=True) (runs ingested "
             "before memory events were kept need ingesting again)")


def compute_run_memory(store: RunStore, run_id: str, baseline: str = "") -> MemoryResult:
    """The memory report of a ready run, from its stored [memory] instants and framework slices (and its allocator
    snapshots and export_memory_timeline files); with a baseline run, each peak against the baseline's."""
    result = _cached_memory(store, run_id)
    if baseline:
        other = _cached_memory(store, baseline)["report"]
        if result["report"] is None or other is None:
            raise BadRequest(f"memory compare needs [memory] events in both runs ({run_id}, {baseline})")
        result["baseline"], result["compare"] = baseline, compare_peaks(result["report"], other)
    return result


def _cached_memory(store: RunStore, run_id: str) -> MemoryResult:
    """The run's memory result, computed once per run (runs are immutable) and kept in the store's memo of derived
    values as its JSON bytes (what the memo's budget can weigh; a decode is milliseconds)."""
    encoded = store.derived.get(run_id, "memory", lambda: msgspec.json.encode(_run_memory(store, run_id)))
    result: MemoryResult = msgspec.json.decode(encoded)
    return result


def _run_memory(store: RunStore, run_id: str) -> MemoryResult:
    rec = store.require_ready(run_id)
    origin = rec.summary.start_ns
    tracks = store.table(run_id, "tracks")
    thread_of_track = thread_keys(tracks)
    snapshot = _snapshot(store, run_id)
    categories = None
    if store.table_path(run_id, "memory_categories").exists():
        # (the profiler's clock: from the run's start when its changes fall in the run, else from the first change)
        table = store.table(run_id, "memory_categories")
        categories = compute_categories(table, origin if _within_run(table, rec.summary.start_ns,
                                                                     rec.summary.end_ns) else None, CATEGORIES)
    hbm = compute_hbm(_hbm_series(store.table(run_id, "counters"), tracks, origin))
    try:
        read = memory_events(store.table(run_id, "instants"), thread_of_track, origin)
    except NoAddresses as exc:
        return MemoryResult(run_id=run_id, report=None, reason=NO_ADDRESSES.format(count=exc.count),
                            snapshot=snapshot, categories=categories, hbm=hbm, baseline="", compare=[])
    if read is None:
        return MemoryResult(run_id=run_id, report=None, reason=NO_EVENTS, snapshot=snapshot, categories=categories,
                            hbm=hbm, baseline="", compare=[])
    keys, events = read
    slices = store.table(run_id, "slices")
    ops, steps = thread_ops(slices, thread_of_track, keys, origin)
    report = compute_memory(events, compute_owners(events, ops), steps)
    return MemoryResult(run_id=run_id, report=report, reason="", snapshot=snapshot, categories=categories,
                        hbm=hbm, baseline="", compare=[])


def _hbm_series(counters: pa.Table, tracks: pa.Table, origin: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The HBM counter series by label (times from the run's start), in time order."""
    labels = dict(zip(tracks.column("track_id").to_pylist(), tracks.column("label").to_pylist(), strict=True))
    kinds = dict(zip(tracks.column("track_id").to_pylist(), tracks.column("kind").to_pylist(), strict=True))
    wanted = [t for t, label in labels.items() if kinds[t] == "counter" and is_hbm_series(label)]
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if not wanted:
        return out
    rows = counters.filter(pc.is_in(counters.column("track_id"), pa.array(wanted, pa.int32())))
    track, ts, value = (rows.column(c).to_numpy() for c in ("track_id", "ts_ns", "value"))
    for t in wanted:
        at = np.flatnonzero(track == t)
        order = at[np.argsort(ts[at], kind="stable")]
        out[labels[t]] = (ts[order] - origin, value[order])
    return out


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
    figures |= {f"hbm-{i}": make_hbm_figure(h) for i, h in enumerate(data["hbm"])}
    if data["report"] is not None:
        peaks = {p["device"]: p["ts_ns"] for p in data["report"]["peaks"]}
        figures |= {f"timeline-{i}": make_memory_figure(t, peaks.get(t["device"]))
                    for i, t in enumerate(data["report"]["timelines"])}
    query = f"?{urlencode({'baseline': baseline})}" if baseline else ""
    return MemoryPage(run_json(rec), data, figures, f"/api/runs/{run_id}/memory{query}")


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


def make_hbm_figure(hbm: HbmUsage) -> dict[str, Any]:
    """One HBM's usage by type over time, stacked, with the total as a line."""
    x = [t / 1e6 for t in hbm["ts_ns"]]
    mib = 2.0**20
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "stackgroup": "types", "name": html.escape(name, quote=False), "x": x,
         "y": [v / mib for v in values], "line": {"width": 0, "shape": "hv"},
         "fillcolor": OWNER_COLORS[k % len(OWNER_COLORS)], "hovertemplate": "%{fullData.name}: %{y:.2f} MiB<extra></extra>"}
        for k, (name, values) in enumerate(zip(hbm["types"], hbm["series"], strict=True))]
    data.append({"type": "scatter", "mode": "lines", "name": "total", "x": x, "y": [v / mib for v in hbm["total"]],
                 "line": {"color": "#24292f", "width": 1.2, "shape": "hv"},
                 "hovertemplate": "total: %{y:.2f} MiB<extra></extra>"})
    return {"data": data, "layout": {
        "title": {"text": f"HBM usage by type · {html.escape(hbm['where'])}", "x": 0, "font": {"size": 13}},
        "height": 300, "margin": {"l": 8, "r": 16, "t": 32, "b": 36}, "showlegend": True,
        "legend": {"orientation": "h", "y": -0.25}, "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "x unified",
        "xaxis": {"title": {"text": "ms from the run's start"}, "gridcolor": "#e6e8eb", "automargin": True},
        "yaxis": {"title": {"text": "MiB"}, "gridcolor": "#e6e8eb", "rangemode": "tozero", "automargin": True}}}
