"""The offline report: one self-contained HTML file (styles, scripts, plotly.js and the run's data inlined)
with the run's pages, built by their explorer.views builders, plus a timeline snapshot; its weight is bounded
(REPORT_TABLE_ROWS, byte budgets in explorer.report.snapshot), not the trace's. Nothing here knows about HTTP."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pyarrow as pa
from markupsafe import Markup

from explorer import __version__
from explorer.analysis.timeline.index import WindowPart, compute_bounded_window
from explorer.analysis.timeline.layout import MAX_HEIGHT_PX, track_budget
from explorer.config import asset_dir
from explorer.model.advice_shapes import AdviceResult
from explorer.model.shapes import RunJson
from explorer.report.snapshot import snapshot_chains, snapshot_rules
from explorer.runs.run import Run
from explorer.store.run_queries import load_slice_column
from explorer.store.runs import RunStore
from explorer.views.advice import run_advice
from explorer.views.collectives import CollectivesPage, build_collectives_page
from explorer.views.device import DevicePage, build_device_pages
from explorer.views.kernels import KernelsPage, build_kernels_page
from explorer.views.memory import MemoryPage, build_memory_page
from explorer.views.ops import OpsPage, build_ops_page
from explorer.views.overview import OverviewPage, build_overview
from explorer.views.ranks import RanksPage, build_ranks_page
from explorer.views.render import APP_SCRIPTS, APP_STYLES, inline_asset, inline_plotly, make_environment
from explorer.views.steps import StepsPage, build_steps_page
from explorer.views.timeline import compute_device_alignment, run_tracks

SNAPSHOT_WIDTH_PX = 4000
SNAPSHOT_ARGS_BYTES = 500_000  # args text embedded in a report, at most
REPORT_TABLE_ROWS = 500  # rows of the op, kernel and collective tables a report holds, at most (in their sort)
# the height a report's timeline window is bounded by: the most one server window sends (MAX_HEIGHT_PX, what
# the live timeline asks when every track fits), so a run of up to track_budget(MAX_HEIGHT_PX) = 909 tracks
# reports every one, and a larger run its first 909 in the timeline's order, the rest as per-lane summaries
SNAPSHOT_HEIGHT_PX = MAX_HEIGHT_PX


@dataclass
class ReportPage:
    """The self-contained report: overview, op table, charts and a timeline snapshot of one run."""

    overview: OverviewPage
    ops: OpsPage
    snapshot: dict[str, Any]
    kernels: KernelsPage | None = None  # None: the run has no device executions
    devices: list[DevicePage] = field(default_factory=list)  # Neuron device profiles: Summary and roofline
    steps: StepsPage | None = None  # None: no ProfilerStep#N in the run
    ranks: RanksPage | None = None  # None: the run has no rank information
    collectives: CollectivesPage | None = None  # None: nothing matched across ranks and no mismatch
    memory: MemoryPage | None = None  # None: no [memory] events in the run
    ops_total: int = 0  # the op table's rows before REPORT_TABLE_ROWS
    kernels_total: int = 0
    advice: AdviceResult | None = None  # the advisor's findings (explorer.views.advice)
    generated_at: float = field(default_factory=time.time)
    version: str = __version__
    readonly: bool = True
    twin: str = ""  # set when a server serves it; a report file has no server to ask

    @property
    def run(self) -> RunJson:
        return self.overview.run


def build_snapshot(run: Run, width_px: int = SNAPSHOT_WIDTH_PX, height_px: int = SNAPSHOT_HEIGHT_PX) -> dict[str, Any]:
    """The bounded window of the whole span (the server's compute_bounded_window: the first tracks that
    fit `height_px` in full, the rest summarised per lane) and the listing of those tracks (`total`: all
    of the run's), so a report's size does not grow with the run's track count."""
    store, run_id, origin = run.store, run.id, run.origin_ns
    start, span = run.default_window()
    index = run.timeline_index()
    parts = [WindowPart(index, index.order.ids)]
    device_index = run.device_index()
    if device_index is not None:  # Neuron device profiles on the host axis, as the live timeline draws them
        parts.append(WindowPart(device_index, device_index.order.ids))
    window = compute_bounded_window(parts, start, span, width_px, height_px)
    # the window's full tracks are the first track_budget in display order: the listing's first page is them
    tracks = run_tracks(run, limit=track_budget(height_px))
    hosts = run.table("slices").num_rows  # device slices (ids past the host's) carry their fields in the window
    ids = [i for tr in window["tracks"] for i in (tr.get("slices") or {}).get("id", []) if i < hosts]
    return {"span_ns": span, "tracks": tracks, "window": window,
            "details": snapshot_details(store, run_id, ids), **snapshot_rules(store, run_id, index),
            "chains": snapshot_chains(store, run_id, ids, origin),
            "device_alignment": compute_device_alignment(run)["profiles"]}


def snapshot_details(store: RunStore, run_id: str, slice_ids: list[int],
                     max_args_bytes: int = SNAPSHOT_ARGS_BYTES) -> dict[str, Any]:
    """What the offline details panel shows beyond the window: each drawn slice's parent (for the
    parent chain) and its args, smallest first until the byte budget is spent (the report says so)."""
    if not slice_ids:
        return {"parent": {}, "args": {}, "args_complete": True}
    ids = np.asarray(sorted(set(slice_ids)), dtype=np.int64)
    parent = store.table(run_id, "slices").column("parent_id").to_numpy()[ids]
    args_col = load_slice_column(store, run_id, "args").take(pa.array(ids)).to_pylist()
    order = np.argsort([len(a or "") for a in args_col], kind="stable")
    args: dict[str, str] = {}
    spent = 0
    for k in order.tolist():
        text = args_col[k] or "{}"
        if spent + len(text) > max_args_bytes:
            break
        if text != "{}":
            args[str(int(ids[k]))] = text
        spent += len(text)
    return {"parent": {str(int(i)): int(p) for i, p in zip(ids, parent, strict=True) if p >= 0},
            "args": args, "args_complete": len(args) == sum(1 for a in args_col if (a or "{}") != "{}")}


def build_report(run: Run, table_rows: int = REPORT_TABLE_ROWS) -> ReportPage:
    """The report's pages, each by the server page's own builder; tables cut to their first `table_rows`."""
    store, run_id = run.store, run.id
    kernel_page = build_kernels_page(run)
    ops = build_ops_page(run)
    steps = build_steps_page(run)
    ranks = build_ranks_page(run)
    colls = build_collectives_page(run, limit=table_rows)
    memory = build_memory_page(store, run_id)
    return ReportPage(build_overview(run), replace(ops, rows=ops.rows[:table_rows]), build_snapshot(run),
                      replace(kernel_page, rows=kernel_page.rows[:table_rows]) if kernel_page.rows else None,
                      build_device_pages(store, run_id), steps=steps if steps.steps["count"] else None,
                      ranks=ranks if ranks.ranks["ranks"] else None,
                      collectives=colls if colls.data["total"] or colls.data["mismatches"] else None,
                      ops_total=len(ops.rows), kernels_total=len(kernel_page.rows),
                      memory=memory if memory.memory["report"] is not None else None,
                      advice=run_advice(run))


# ---- rendering --------------------------------------------------------------------------------

@dataclass
class InlineAssets:
    """The project's CSS and JS (and plotly.js) as text, for a page that must work offline."""

    css: list[Markup]
    scripts: list[Markup]
    plotly: Markup


def inline_assets(static_dir: Path | None = None) -> InlineAssets:
    static = static_dir or asset_dir("static")
    return InlineAssets([inline_asset(static, p) for p in APP_STYLES], [inline_asset(static, p) for p in APP_SCRIPTS],
                        inline_plotly(static))


def render_report(report: ReportPage, env: jinja2.Environment | None = None,
                  static_dir: Path | None = None) -> str:
    """The report as one HTML document."""
    env = env or make_environment()
    return env.get_template("report.html").render(page=report, base="", inline=inline_assets(static_dir),
                                                  active="report", readonly=report.readonly)


def write_report(run: Run, path: Path) -> int:
    """Write the report of `run` to `path`; returns its size in bytes."""
    html = render_report(build_report(run))
    data = html.encode("utf-8")
    path.write_bytes(data)
    return len(data)
