"""Plotly figure dicts built from analysis results: model -> figure, no I/O and no HTML.

Plotly reads a small HTML subset in labels, so every trace-derived label goes through `label()`
(entities, which plotly shows as plain text). Durations are plotted in microseconds.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from explorer.analysis.compare import ops_metric
from explorer.model.lanes import Lane
from explorer.theme import LANE_COLORS

RUN_COLORS = ("#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#76b7b2", "#b07aa1")
FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12, "color": "#24292f"}
MAX_LABEL = 48


def label(text: str, limit: int = MAX_LABEL) -> str:
    """A trace-derived string made inert for plotly's label markup, shortened for an axis."""
    short = text if len(text) <= limit else text[: limit - 1] + "…"
    return html.escape(short, quote=False)


def time_unit(max_ns: float) -> tuple[str, float]:
    """The axis unit for values up to `max_ns`: µs (the profiler's unit) until 10 ms, then ms, then s."""
    if max_ns >= 1e10:
        return "s", 1e9
    if max_ns >= 1e7:
        return "ms", 1e6
    return "µs", 1e3


def _layout(title: str, height: int, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": html.escape(title, quote=False), "x": 0, "xanchor": "left", "font": {"size": 13}},
        "height": height,
        "margin": {"l": 8, "r": 16, "t": 32, "b": 36},
        "font": FONT,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "xaxis": {"gridcolor": "#e6e8eb", "zeroline": False, "automargin": True},
        "yaxis": {"gridcolor": "#e6e8eb", "zeroline": False, "automargin": True},
        "showlegend": False,
        "hoverlabel": {"font": {"family": FONT["family"], "size": 12}},
    }
    layout.update(extra)
    return layout


def make_lane_breakdown_figure(breakdown: Mapping[str, Any]) -> dict[str, Any]:
    """Busy vs idle time per lane (stacked horizontal bars), from the breakdown analysis."""
    lanes = [row for row in breakdown.get("lanes", []) if row.get("lane") != Lane.COUNTER]
    names = [str(r["lane"]) for r in lanes]
    unit, scale = time_unit(max((r["busy_ns"] + r["idle_ns"] for r in lanes), default=0))
    busy = [r["busy_ns"] / scale for r in lanes]
    idle = [r["idle_ns"] / scale for r in lanes]
    pct = [f"{r.get('busy_pct', 0.0):.1f} % busy" for r in lanes]
    data = [
        {"type": "bar", "orientation": "h", "name": "busy", "y": names, "x": busy, "text": pct,
         "textposition": "inside", "insidetextanchor": "start",
         "marker": {"color": [LANE_COLORS.get(n, LANE_COLORS["other"]) for n in names]},
         "hovertemplate": "%{y}: %{x:,.1f} " + unit + " busy<extra></extra>"},
        {"type": "bar", "orientation": "h", "name": "idle", "y": names, "x": idle,
         "marker": {"color": "#e6e8eb"}, "hovertemplate": "%{y}: %{x:,.1f} " + unit + " idle<extra></extra>"},
    ]
    layout = _layout(f"Lane busy / idle ({unit})", 60 + 34 * max(1, len(names)), barmode="stack")
    layout["yaxis"] = {**layout["yaxis"], "autorange": "reversed"}
    return {"data": data, "layout": layout}


def op_row_label(row: Mapping[str, Any]) -> str:
    """An op table row as one bar label: per input shape or per module, one name has several rows,
    so the module path and the shapes tell the bars apart."""
    parts = [str(row["module"]) + ":" if row.get("module") else "", str(row["name"]), str(row.get("input_shapes") or "")]
    return " ".join(p for p in parts if p)


def make_top_ops_figure(rows: Sequence[Mapping[str, Any]], metric: str = "device_total_ns", top: int = 15,
                        title: str | None = None) -> dict[str, Any]:
    """Horizontal bars of the `top` ops by `metric` (a *_ns column of the op table)."""
    chosen = sorted((r for r in rows if r.get(metric, 0) > 0), key=lambda r: -r[metric])[:top]
    names = [label(op_row_label(r), 64) for r in chosen]
    unit, scale = time_unit(max((r[metric] for r in chosen), default=0))
    values = [r[metric] / scale for r in chosen]
    color = LANE_COLORS["hardware"] if "device" in metric else LANE_COLORS["framework"]
    pretty = {"device_total_ns": "device time", "self_device_ns": "self device time", "cpu_total_ns": "CPU time",
              "self_cpu_ns": "self CPU time", "cpu_avg_ns": "average CPU time"}.get(metric, metric)
    data = [{"type": "bar", "orientation": "h", "y": names, "x": values, "marker": {"color": color},
             "customdata": [r.get("calls", 0) for r in chosen],
             "hovertemplate": "%{y}<br>%{x:,.1f} " + unit + ", %{customdata} calls<extra></extra>"}]
    layout = _layout(title or f"Top ops by {pretty} ({unit})", 70 + 22 * max(1, len(names)))
    layout["yaxis"] = {**layout["yaxis"], "autorange": "reversed", "type": "category"}
    return {"data": data, "layout": layout}


def compare_metric(compare: Mapping[str, Any]) -> str:
    """The compare op table's time (device time, or CPU time for host-only profiles): one rule,
    explorer.analysis.compare.ops_metric."""
    return ops_metric(compare.get("runs", []))


def make_compare_figure(compare: Mapping[str, Any], top: int = 12) -> dict[str, Any]:
    """Grouped bars: self time per op (self device, or self CPU without a device), one bar per run, top
    ops first. Self time, not the op's total: a parent's total holds its children's, which have bars too."""
    runs = list(compare.get("runs", []))
    rows = list(compare.get("rows", []))
    metric = "self_device_ns" if compare_metric(compare) == "device_total_ns" else "self_cpu_ns"

    def weight(row: Mapping[str, Any]) -> int:
        return max((p[metric] for p in row["per_run"] if p), default=0)

    rows = sorted((r for r in rows if weight(r) > 0), key=lambda r: -weight(r))[:top]
    names = [label(str(r["name"]), 32) for r in rows]
    unit, scale = time_unit(max((weight(r) for r in rows), default=0))
    data = []
    for i, run in enumerate(runs):
        values = [(r["per_run"][i][metric] / scale if r["per_run"][i] else 0.0) for r in rows]
        data.append({"type": "bar", "name": label(str(run.get("name") or run["id"]), 40), "x": names,
                     "y": values, "marker": {"color": RUN_COLORS[i % len(RUN_COLORS)]},
                     "hovertemplate": "%{x}<br>%{y:,.1f} " + unit + "<extra>%{fullData.name}</extra>"})
    title = (f"Self device time per op ({unit})" if metric == "self_device_ns"
             else f"Self CPU time per op ({unit}), no device time")
    layout = _layout(title, 340, barmode="group", showlegend=True,
                     legend={"orientation": "h", "y": 1.12, "x": 1, "xanchor": "right"})
    layout["xaxis"] = {**layout["xaxis"], "type": "category", "tickangle": -30}
    return {"data": data, "layout": layout}


# ---- kernels ----------------------------------------------------------------------------------

KERNEL_CATEGORY_COLORS = {
    "compute": "#59a14f",
    "communication": "#e15759",
    "memcpy HtoD": "#4e79a7",
    "memcpy DtoH": "#76b7b2",
    "memcpy DtoD": "#9c755f",
    "memcpy PtoP": "#edc948",
    "memcpy other": "#bab0ac",
    "memset": "#b07aa1",
    "other": "#9c9c9c",
}


def make_top_kernels_figure(rows: Sequence[Mapping[str, Any]], top: int = 15) -> dict[str, Any]:
    """Horizontal bars of the `top` kernels by total time, coloured by category. Long C++ names share
    long prefixes, so each bar is numbered (a category axis would merge equal labels), a leading
    `void ` return type is dropped and the hover shows the name at length."""
    chosen = sorted((r for r in rows if r.get("total_ns", 0) > 0), key=lambda r: (-r["total_ns"], r["name"]))[:top]
    names = [f"{i + 1}. {label(str(r['name']).removeprefix('void '), 56)}" for i, r in enumerate(chosen)]
    unit, scale = time_unit(max((r["total_ns"] for r in chosen), default=0))
    data = [{"type": "bar", "orientation": "h", "y": names, "x": [r["total_ns"] / scale for r in chosen],
             "marker": {"color": [KERNEL_CATEGORY_COLORS.get(str(r["category"]), "#9c9c9c") for r in chosen]},
             "customdata": [[label(str(r["name"]), 400), r["calls"], label(str(r["category"]))] for r in chosen],
             "hovertemplate": "%{customdata[0]}<br>%{x:,.1f} " + unit
                              + ", %{customdata[1]} calls, %{customdata[2]}<extra></extra>"}]
    layout = _layout(f"Top kernels by device time ({unit})", 70 + 22 * max(1, len(names)))
    layout["yaxis"] = {**layout["yaxis"], "autorange": "reversed", "type": "category"}
    return {"data": data, "layout": layout}


def make_kernel_category_figure(categories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Device time per kernel category (compute, communication, memcpy kinds, memset, other)."""
    rows = [c for c in categories if c.get("total_ns", 0) > 0]
    names = [label(str(c["category"])) for c in rows]
    unit, scale = time_unit(max((c["total_ns"] for c in rows), default=0))
    data = [{"type": "bar", "orientation": "h", "y": names, "x": [c["total_ns"] / scale for c in rows],
             "text": [f"{float(c['device_pct']):.1f} %" for c in rows], "textposition": "auto",
             "marker": {"color": [KERNEL_CATEGORY_COLORS.get(str(c["category"]), "#9c9c9c") for c in rows]},
             "customdata": [c["calls"] for c in rows],
             "hovertemplate": "%{y}: %{x:,.1f} " + unit + ", %{customdata} calls<extra></extra>"}]
    layout = _layout(f"Device time by kernel category ({unit})", 70 + 28 * max(1, len(names)))
    layout["yaxis"] = {**layout["yaxis"], "autorange": "reversed", "type": "category"}
    return {"data": data, "layout": layout}


# ---- device profiles (Neuron) ---------------------------------------------------------------------

ROOFLINE_POINT_STYLES = {"profile": ("#e15759", 14, "diamond"), "window": ("#f28e2b", 13, "star"),
                         "layer": ("#4e79a7", 9, "circle")}
ROOFLINE_TEXT_POSITION = {"profile": "top left", "window": "bottom right"}  # the two often sit close


def _roofline_hover(point: Mapping[str, Any]) -> str:
    distance = point.get("distance_to_roof")
    gap = "on the roof" if distance is not None and distance <= 1.0 else (
        f"{distance:,.2f}× below the roof" if distance is not None else "no time")
    return (f"{label(str(point['label']))}<br>{point['bound']}-bound, {gap}<br>"
            f"{(point.get('achieved_flops_per_s') or 0) / 1e12:,.3f} TFLOP/s achieved of "
            f"{point['attainable_flops_per_s'] / 1e12:,.3f} attainable")


def make_roofline_figure(roofline: Mapping[str, Any]) -> dict[str, Any]:
    """Achieved FLOP/s against arithmetic intensity (log-log) under the bandwidth roof (`hbm_ddr_bandwidth`
    × intensity) and the compute roof (`max_ops`), which meet at the ridge (`peak_flops_bandwidth_ratio`).
    A point that moved no HBM byte has no intensity: it is drawn at the right edge, under the compute roof."""
    if not roofline.get("available"):
        return {"data": [], "layout": _layout("Roofline: the export has no Metadata peaks", 120)}
    peak, bandwidth, ridge = roofline["max_ops"], roofline["hbm_ddr_bandwidth"], roofline["peak_flops_bandwidth_ratio"]
    points = [p for p in roofline["points"] if p.get("achieved_flops_per_s")]
    known = [p["intensity"] for p in points if p.get("intensity")]
    x_lo = min([ridge / 100, *(x / 4 for x in known)])
    x_hi = max([ridge * 100, *(x * 4 for x in known)])
    data: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "lines", "name": "roof", "x": [x_lo, ridge, x_hi],
        "y": [x_lo * bandwidth, peak, peak], "line": {"color": "#57606a", "width": 2},
        "hovertemplate": "roof: %{y:.3s}FLOP/s at %{x:.3g} FLOP/byte<extra></extra>"}]
    for kind, (color, size, symbol) in ROOFLINE_POINT_STYLES.items():
        mine = [p for p in points if p["kind"] == kind]
        if not mine:
            continue
        data.append({"type": "scatter", "mode": "markers+text" if kind != "layer" else "markers", "name": kind,
                     "x": [p["intensity"] or x_hi for p in mine], "y": [p["achieved_flops_per_s"] for p in mine],
                     "text": [label(str(p["label"]), 24) for p in mine],
                     "textposition": ROOFLINE_TEXT_POSITION.get(kind, "top center"),
                     "hovertext": [_roofline_hover(p) for p in mine], "hoverinfo": "text",
                     "marker": {"color": color, "size": size, "symbol": symbol}})
    layout = _layout("Roofline (FLOP/s against FLOP per HBM byte)", 380, showlegend=True,
                     shapes=[{"type": "line", "x0": ridge, "x1": ridge, "y0": 0, "y1": 1, "yref": "paper",
                              "line": {"color": "#c9ccd1", "dash": "dot", "width": 1}}],
                     annotations=[{"x": math.log10(ridge), "y": 1, "yref": "paper", "text": "ridge",
                                   "showarrow": False, "yanchor": "bottom", "font": {"size": 11}}])
    layout["xaxis"] = {**layout["xaxis"], "type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}}
    layout["yaxis"] = {**layout["yaxis"], "type": "log", "title": {"text": "FLOP/s"}}
    layout["margin"] = {**layout["margin"], "l": 60, "b": 48}
    return {"data": data, "layout": layout}


def make_sbuf_figure(rects: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """SBUF allocations as address × time rectangles (one colour per partition): plotly shapes, with an
    invisible marker at each centre carrying the hover."""
    unit, scale = time_unit(max((r["end_ns"] - r["start_ns"] for r in rects), default=0))
    partitions = sorted({r["partition"] for r in rects}, key=lambda p: (p is None, p))
    shapes, xs, ys, hover = [], [], [], []
    for r in rects:
        color = RUN_COLORS[partitions.index(r["partition"]) % len(RUN_COLORS)]
        x0, x1 = r["start_ns"] / scale, r["end_ns"] / scale
        shapes.append({"type": "rect", "x0": x0, "x1": x1, "y0": r["start_address"], "y1": r["end_address"],
                       "fillcolor": color, "opacity": 0.55, "line": {"color": color, "width": 1}})
        xs.append((x0 + x1) / 2)
        ys.append((r["start_address"] + r["end_address"]) / 2)
        hover.append(f"{label(str(r['tensor_name'] or ''))}<br>partition {r['partition']}<br>"
                     f"address {r['start_address']:,}–{r['end_address']:,}")
    data = [{"type": "scatter", "mode": "markers", "x": xs, "y": ys, "hovertext": hover, "hoverinfo": "text",
             "marker": {"opacity": 0, "size": 12}, "name": "allocations"}]
    layout = _layout(f"SBUF allocations (address × time, {unit})", 300, shapes=shapes)
    layout["yaxis"] = {**layout["yaxis"], "title": {"text": "address"}}
    return {"data": data, "layout": layout}


STEP_PART_COLORS = {"compute": KERNEL_CATEGORY_COLORS["compute"], "communication": KERNEL_CATEGORY_COLORS["communication"],
                    "memcpy": KERNEL_CATEGORY_COLORS["memcpy HtoD"], "memset": KERNEL_CATEGORY_COLORS["memset"],
                    "other": "#9c9c9c", "idle": "#d9dce0"}


def make_steps_figure(steps: Mapping[str, Any]) -> dict[str, Any]:
    """Per step, stacked bars of device compute / communication / memcpy / memset / other / idle time
    (the step analysis' parts add up to the step time), one bar per step in order; on a multi-rank run one
    bar per (step, rank), grouped by step on a two-level axis (the k-th step of each rank side by side)."""
    rows = list(steps.get("steps", []))
    if steps.get("ranks"):
        position: dict[Any, int] = {}
        order = []
        for r in rows:  # rows are by rank then start: a row's position is its index among its rank's steps
            order.append((position.get(r["rank"], 0), r["rank"]))
            position[r["rank"]] = position.get(r["rank"], 0) + 1
        rows = [r for _, r in sorted(zip(order, rows, strict=True), key=lambda p: p[0])]
        x: list[Any] = [[label(f"{r['name']}", 40) for r in rows], [f"rank {r['rank']}" for r in rows]]
    else:
        x = [label(f"{r['name']}", 40) for r in rows]
    unit, scale = time_unit(max((r["dur_ns"] for r in rows), default=0))
    data = [{"type": "bar", "name": part, "x": x, "y": [r[f"{part}_ns"] / scale for r in rows],
             "marker": {"color": color}, "hovertemplate": "%{x}<br>" + part + ": %{y:,.1f} " + unit + "<extra></extra>"}
            for part, color in STEP_PART_COLORS.items()]
    layout = _layout(f"Step time by device activity ({unit})", 320, barmode="stack", showlegend=True,
                     legend={"orientation": "h", "y": -0.2})
    layout["xaxis"] = {**layout["xaxis"], "type": "multicategory" if steps.get("ranks") else "category"}
    return {"data": data, "layout": layout}


RANK_PART_COLORS = {"compute": STEP_PART_COLORS["compute"], "exposed communication": STEP_PART_COLORS["communication"],
                    "memcpy": STEP_PART_COLORS["memcpy"],
                    "idle": STEP_PART_COLORS["idle"]}


def make_ranks_figure(ranks: Mapping[str, Any]) -> dict[str, Any]:
    """Per rank, stacked bars of compute, exposed communication (not overlapped by compute), memcpy and
    idle time in its window (explorer.analysis.ranks); stragglers' bars are named "rank N (straggler)"."""
    rows = ranks.get("ranks", [])
    names = [f"rank {r['rank']}" + (" (straggler)" if r["straggler"] else "") for r in rows]
    values = {"compute": [r["compute_ns"] for r in rows],
              "exposed communication": [r["exposed_comm_ns"] for r in rows],
              "memcpy": [r["memcpy_ns"] for r in rows], "idle": [r["idle_ns"] for r in rows]}
    unit, scale = time_unit(max((r["window_ns"] for r in rows), default=0))
    data = [{"type": "bar", "name": part, "x": names, "y": [v / scale for v in values[part]],
             "marker": {"color": color},
             "hovertemplate": "%{x}<br>" + part + ": %{y:,.1f} " + unit + "<extra></extra>"}
            for part, color in RANK_PART_COLORS.items()]
    layout = _layout(f"Time per rank in its steps ({unit})", 340, barmode="stack",
                     showlegend=True, legend={"orientation": "h", "y": -0.2})
    layout["xaxis"] = {**layout["xaxis"], "type": "category"}
    return {"data": data, "layout": layout}


FLEET_VERDICT_COLORS = {"regression": "#d1242f", "improvement": "#1a7f37", "ok": RUN_COLORS[0], "first": RUN_COLORS[0]}


def make_fleet_figure(fleet: Mapping[str, Any]) -> dict[str, Any]:
    """One name's total time per run, oldest first (a line with a marker per run, red where the run
    regressed against the median of the runs before it), and that median as a dotted line."""
    points = fleet.get("runs", [])
    xs = [f"{i + 1}. {label(str(p['run']), 32)}" for i, p in enumerate(points)]
    unit, scale = time_unit(max((p["total_ns"] for p in points), default=0))
    hover = "%{x}<br>%{y:,.1f} " + unit + "<br>%{customdata}<extra></extra>"
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers", "name": label(str(fleet.get("name", ""))), "x": xs,
         "y": [p["total_ns"] / scale for p in points], "customdata": [p["verdict"] for p in points],
         "marker": {"size": 9, "color": [FLEET_VERDICT_COLORS.get(p["verdict"], RUN_COLORS[0]) for p in points]},
         "line": {"color": RUN_COLORS[0]}, "hovertemplate": hover},
        {"type": "scatter", "mode": "lines", "name": "median of the previous runs", "x": xs,
         "y": [None if p["median_prev_ns"] is None else p["median_prev_ns"] / scale for p in points],
         "line": {"color": "#8c959f", "dash": "dot"}, "hovertemplate": "median before: %{y:,.1f} " + unit + "<extra></extra>"},
    ]
    what = "device time" if fleet.get("kind") == "op" else "time"
    title = str(fleet.get("name", ""))  # _layout escapes the title itself
    layout = _layout(f"{title if len(title) <= 60 else title[:59] + '…'}: total {what} per run ({unit})", 320,
                     showlegend=True, legend={"orientation": "h", "y": -0.3})
    layout["xaxis"] = {**layout["xaxis"], "type": "category"}
    return {"data": data, "layout": layout}
