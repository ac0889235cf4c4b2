"""The memory page (`/runs/{id}/memory`; its twin's data, `/api/runs/{id}/memory`, is computed once in
explorer/views/memory_data.py) and its figures: the timeline by owner, the allocator snapshot, the categories and
HBM by type. Times are ns from the run's start, as in every other page."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from explorer.analysis.alloc_snapshot import SnapshotDevice
from explorer.analysis.hbm import HbmUsage
from explorer.analysis.memory_categories import CategoryTimeline
from explorer.model.shapes import RunJson
from explorer.store.runs import RunStore
from explorer.views.links import run_json
from explorer.views.memory_data import MemoryResult, compute_run_memory, run_peak_memory

__all__ = ["MemoryPage", "MemoryResult", "build_memory_page", "compute_run_memory", "run_peak_memory"]

OWNER_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                "#9c755f", "#bab0ac")


@dataclass
class MemoryPage:
    """`/runs/{id}/memory`; twin `/api/runs/{id}/memory`."""

    run: RunJson
    memory: MemoryResult
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    twin: str = ""


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
