"""Page data, computed once and rendered twice (HTML page and JSON twin), and the offline report.

Each `build_*` returns one typed context object holding the same data its JSON twin returns; the
server's page handlers and `trace-explorer report` both use them. `render_report` writes one
self-contained HTML file: styles, scripts, plotly.js and the run's data inlined, no network needed.
Nothing here knows about HTTP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
import numpy as np
import pyarrow as pa
from markupsafe import Markup

from explorer import __version__
from explorer.analysis.breakdown import compute_breakdown
from explorer.analysis.compare import RunOps, compute_compare
from explorer.analysis.kernels import KernelTable
from explorer.analysis.lod import TimelineIndex, build_timeline_index, compute_window
from explorer.charts import (
    compare_metric,
    make_compare_figure,
    make_kernel_category_figure,
    make_lane_breakdown_figure,
    make_top_kernels_figure,
    make_top_ops_figure,
)
from explorer.config import PROJECT_ROOT
from explorer.errors import BadRequest
from explorer.kernel_page import KernelsPage, compute_run_kernels, kernels_json
from explorer.render import APP_SCRIPTS, APP_STYLES, inline_asset, inline_plotly, make_environment
from explorer.store.catalog import RunRecord
from explorer.store.queries import OP_COLUMNS, load_ops
from explorer.store.run_queries import load_slice_column
from explorer.store.runs import RunStore

SNAPSHOT_WIDTH_PX = 4000
SNAPSHOT_ARGS_BYTES = 2_000_000  # args text embedded in a report, at most
TOP_OPS = 15
TEXT_COLUMNS = ("name", "input_shapes")


def run_links(run_id: str) -> dict[str, str]:
    api = f"/api/runs/{run_id}"
    return {"self": api, "page": f"/runs/{run_id}", "tracks": f"{api}/tracks", "timeline": f"{api}/timeline",
            "ops": f"{api}/ops", "breakdown": f"{api}/breakdown", "search": f"{api}/search", "sql": f"{api}/sql"}


def run_json(rec: RunRecord) -> dict[str, Any]:
    """A run as the API's `Run` object (docs/API.md; tests pin it equal to GET /api/runs/{id})."""
    return {"id": rec.id, "name": rec.name, "status": rec.status, "progress": rec.progress,
            "message": rec.message, "tags": rec.tags, "created_at": rec.created_at, "sha256": rec.sha256,
            "source": rec.source, "summary": rec.summary, "links": run_links(rec.id)}


@dataclass
class RunsPage:
    """`/` and its twin `/api/runs`."""

    runs: list[dict[str, Any]]
    total: int
    twin: str = "/api/runs"


@dataclass
class NotReadyPage:
    """Any run page of a run still ingesting, or failed; twin `/api/runs/{id}`."""

    run: dict[str, Any]
    twin: str = ""


@dataclass
class OverviewPage:
    """`/runs/{id}`; twins `/api/runs/{id}` and `/api/runs/{id}/breakdown`."""

    run: dict[str, Any]
    breakdown: dict[str, Any]
    top_device: list[dict[str, Any]]
    top_cpu: list[dict[str, Any]]
    figures: dict[str, dict[str, Any]]
    twin: str = ""

    @property
    def device_busy_pct(self) -> float | None:
        devices = self.breakdown.get("devices", [])
        if devices:
            return max(float(d["busy_pct"]) for d in devices)
        hw = [r for r in self.breakdown.get("lanes", []) if r["lane"] == "hardware"]
        return float(hw[0]["busy_pct"]) if hw else None


@dataclass
class OpsPage:
    """`/runs/{id}/ops?sort=&q=&by_shape=&limit=`; twin `/api/runs/{id}/ops` with the same query."""

    run: dict[str, Any]
    rows: list[dict[str, Any]]
    device_total_ns: int
    sort: str
    q: str
    by_shape: bool
    limit: int | None
    figure: dict[str, Any]
    twin: str = ""

    @property
    def descending(self) -> bool:
        """load_ops' rule: `-col` descending, `+col` ascending, a bare column descending unless `name`."""
        return self.sort.startswith("-") or (self.sort.lstrip("-+") != "name" and not self.sort.startswith("+"))

    def sort_link(self, column: str) -> str:
        """Query string sorting by `column`: numbers first descending, text ascending; the sorted
        column flips."""
        desc = not self.descending if self.sort.lstrip("-+") == column else column not in TEXT_COLUMNS
        return "?" + self.query(sort=("-" if desc else "+") + column)

    def query(self, **override: Any) -> str:
        params: dict[str, Any] = {"sort": self.sort, "q": self.q, "by_shape": int(self.by_shape)}
        if self.limit is not None:
            params["limit"] = self.limit
        params.update(override)
        return urlencode({k: v for k, v in params.items() if v not in ("", None, 0) or k == "sort"})


@dataclass
class TimelinePage:
    """`/runs/{id}/timeline`; the canvas pulls `/api/runs/{id}/timeline` windows itself."""

    run: dict[str, Any]
    span_ns: int
    twin: str = ""


@dataclass
class ComparePage:
    """`/compare?runs=a,b,c`; twin `/api/compare?runs=a,b,c`."""

    compare: dict[str, Any]
    figure: dict[str, Any]
    twin: str = ""

    @property
    def metric(self) -> str:
        return compare_metric(self.compare)

    @property
    def deltas(self) -> list[tuple[int, float | None]]:
        """Per row: (last run - baseline, % change) in the headline's metric (device, or CPU time)."""
        out: list[tuple[int, float | None]] = []
        for row in self.compare["rows"]:
            first, last = row["per_run"][0], row["per_run"][-1]
            a = int(first[self.metric]) if first else 0
            b = int(last[self.metric]) if last else 0
            out.append((b - a, None if not first or not a else 100.0 * (b - a) / a))
        return out

    @property
    def headline(self) -> dict[str, Any]:
        """Totals per run and % change against the first, in device time (CPU time without a device)."""
        metric = self.metric
        totals = [int(r[metric]) for r in self.compare["runs"]]
        pcts = [None if not totals[0] else 100.0 * (t - totals[0]) / totals[0] for t in totals]
        return {"what": "device time" if metric == "device_total_ns" else "CPU time", "totals_ns": totals,
                "pct_change": pcts}


@dataclass
class ReportPage:
    """The self-contained report: overview, op table, charts and a timeline snapshot of one run."""

    overview: OverviewPage
    ops: OpsPage
    snapshot: dict[str, Any]
    kernels: KernelsPage | None = None  # None: the run has no device executions
    generated_at: float = field(default_factory=time.time)
    version: str = __version__
    readonly: bool = True
    twin: str = ""  # set when a server serves it; a report file has no server to ask

    @property
    def run(self) -> dict[str, Any]:
        return self.overview.run


# ---- builders ---------------------------------------------------------------------------------

def build_runs_page(store: RunStore, name: str = "", tag: str = "") -> RunsPage:
    records, total = store.catalog.list(name=name or None, tag=tag or None, limit=1000)
    q = urlencode({k: v for k, v in (("name", name), ("tag", tag)) if v})
    return RunsPage([run_json(r) for r in records], total, "/api/runs" + (f"?{q}" if q else ""))


def compute_run_breakdown(store: RunStore, run_id: str) -> dict[str, Any]:
    s = store.require_ready(run_id).summary
    t = store.table
    return compute_breakdown(t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "flows"),
                             int(s["start_ns"]), int(s["end_ns"]))


def build_overview(store: RunStore, run_id: str, breakdown: dict[str, Any] | None = None) -> OverviewPage:
    rec = store.require_ready(run_id)
    bd = breakdown if breakdown is not None else compute_run_breakdown(store, run_id)
    rows = load_ops(store, run_id, sort="-device_total_ns")
    top_device = [r for r in rows if r["device_total_ns"] > 0][:TOP_OPS]
    top_cpu = sorted(rows, key=lambda r: -r["cpu_total_ns"])[:TOP_OPS]
    figures = {"lanes": make_lane_breakdown_figure(bd),
               "top_device": make_top_ops_figure(top_device, "device_total_ns"),
               "top_cpu": make_top_ops_figure(top_cpu, "cpu_total_ns")}
    if not top_device:  # a host-only profile: self CPU time says more than an empty device chart
        figures["top_device"] = make_top_ops_figure(rows, "self_cpu_ns", title="No device time: top ops by self CPU")
    return OverviewPage(run_json(rec), bd, top_device, top_cpu, figures, f"/api/runs/{run_id}")


def build_ops_page(store: RunStore, run_id: str, sort: str = "-device_total_ns", q: str = "",
                   by_shape: bool = False, limit: int | None = None) -> OpsPage:
    rec = store.require_ready(run_id)
    if sort.lstrip("-+") not in OP_COLUMNS:
        raise BadRequest(f"cannot sort by {sort!r}; columns: {', '.join(OP_COLUMNS)}")
    rows = load_ops(store, run_id, sort=sort, limit=limit, by_shape=by_shape, name_filter=q)
    device_total = int(rec.summary.get("device", {}).get("device_total_ns", 0))
    page = OpsPage(run_json(rec), rows, device_total, sort, q, by_shape, limit,
                   make_top_ops_figure(rows, "device_total_ns" if device_total else "self_cpu_ns"))
    page.twin = f"/api/runs/{run_id}/ops?{page.query()}"
    return page


def build_timeline_page(store: RunStore, run_id: str) -> TimelinePage:
    rec = store.require_ready(run_id)
    span = int(rec.summary.get("span_ns", 0))
    return TimelinePage(run_json(rec), span,
                        f"/api/runs/{run_id}/timeline?start_ns=0&end_ns={max(span, 1)}&width_px=2000")


def build_compare_page(store: RunStore, run_ids: list[str]) -> ComparePage:
    if not 2 <= len(run_ids) <= 6:
        raise BadRequest("compare takes two to six runs: /compare?runs=a,b")
    sides = []
    for rid in run_ids:
        rec = store.require_ready(rid)
        sides.append(RunOps(rec.id, rec.name, store.table(rid, "op_stats"),
                            int(rec.summary.get("device", {}).get("device_total_ns", 0))))
    data = compute_compare(sides)
    return ComparePage(data, make_compare_figure(data), "/api/compare?runs=" + ",".join(run_ids))


def build_tracks(store: RunStore, run_id: str) -> dict[str, Any]:
    """The `/api/runs/{id}/tracks` object."""
    rec = store.require_ready(run_id)
    return {"origin_ns": int(rec.summary["start_ns"]), "tracks": store.table(run_id, "tracks").to_pylist()}


def build_snapshot(store: RunStore, run_id: str, width_px: int = SNAPSHOT_WIDTH_PX,
                   index: TimelineIndex | None = None) -> dict[str, Any]:
    """The LOD window of the whole span plus the tracks: what the offline timeline draws. A server
    passes its cached `index`; without one it is built here."""
    rec = store.require_ready(run_id)
    origin, span = int(rec.summary["start_ns"]), max(int(rec.summary["span_ns"]), 1)
    t = store.table
    ix = index or build_timeline_index(t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "counters"),
                                       t(run_id, "flows"), origin, t(run_id, "instants"))
    window = compute_window(ix, 0, span, width_px)
    ids = [i for tr in window["tracks"] for i in (tr.get("slices") or {}).get("id", [])]
    return {"span_ns": span, "tracks": build_tracks(store, run_id), "window": window,
            "details": snapshot_details(store, run_id, ids)}


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


def build_report(store: RunStore, run_id: str, overview: OverviewPage | None = None,
                 index: TimelineIndex | None = None, kernels: KernelTable | None = None) -> ReportPage:
    kernel_page = build_kernels_page(store, run_id, kernels=kernels)
    return ReportPage(overview or build_overview(store, run_id), build_ops_page(store, run_id),
                      build_snapshot(store, run_id, index=index), kernel_page if kernel_page.rows else None)


# ---- kernels ----------------------------------------------------------------------------------

def build_kernels_page(store: RunStore, run_id: str, sort: str = "-total_ns", q: str = "", category: str = "",
                       limit: int | None = None, kernels: KernelTable | None = None) -> KernelsPage:
    """A server passes its cached `kernels`; without them they are computed here."""
    rec = store.require_ready(run_id)
    data = kernels_json(kernels or compute_run_kernels(store, run_id), sort, q, category, limit)
    figures = {"top": make_top_kernels_figure(data["rows"]), "categories": make_kernel_category_figure(data["categories"])}
    page = KernelsPage(run_json(rec), data["rows"], data["device_total_ns"], data["categories"], sort, q, category,
                       limit, figures)
    page.twin = f"/api/runs/{run_id}/kernels?{page.query()}"
    return page


# ---- rendering --------------------------------------------------------------------------------

@dataclass
class InlineAssets:
    """The project's CSS and JS (and plotly.js) as text, for a page that must work offline."""

    css: list[Markup]
    scripts: list[Markup]
    plotly: Markup


def inline_assets(static_dir: Path | None = None) -> InlineAssets:
    static = static_dir or PROJECT_ROOT / "static"
    return InlineAssets([inline_asset(static, p) for p in APP_STYLES], [inline_asset(static, p) for p in APP_SCRIPTS],
                        inline_plotly())


def render_report(report: ReportPage, env: jinja2.Environment | None = None,
                  static_dir: Path | None = None) -> str:
    """The report as one HTML document."""
    env = env or make_environment()
    return env.get_template("report.html").render(page=report, base="", inline=inline_assets(static_dir),
                                                  active="report", readonly=report.readonly)


def write_report(store: RunStore, run_id: str, path: Path) -> int:
    """Write the report of `run_id` to `path`; returns its size in bytes."""
    html = render_report(build_report(store, run_id))
    data = html.encode("utf-8")
    path.write_bytes(data)
    return len(data)
