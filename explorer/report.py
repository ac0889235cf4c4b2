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
from explorer.analysis.compare import RunOps, compute_compare, kernel_table
from explorer.analysis.kernels import KernelTable
from explorer.analysis.lod import TimelineIndex, build_timeline_index, compute_window
from explorer.charts import (
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
from explorer.snapshot import snapshot_chains, snapshot_rules
from explorer.store.catalog import RunRecord
from explorer.store.queries import (
    DEFAULT_OP_VIEW,
    OP_COLUMNS,
    OP_TIME_COLUMNS,
    OP_VIEWS,
    check_op_view,
    default_op_sort,
    has_module_frames,
    load_ops,
    op_table,
    run_device_total_ns,
    select_op_view,
)
from explorer.store.run_queries import load_slice_column
from explorer.store.runs import RunStore

SNAPSHOT_WIDTH_PX = 4000
SNAPSHOT_ARGS_BYTES = 2_000_000  # args text embedded in a report, at most
TOP_OPS = 15
TEXT_COLUMNS = ("name", "input_shapes")
MAX_COMPARE_RUNS = 8


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
    view: str = DEFAULT_OP_VIEW
    by_module: bool = False
    has_modules: bool = False  # the run has nn.Module frames (with_modules): grouping by module is offered
    twin: str = ""
    views: tuple[str, ...] = tuple(OP_VIEWS)

    def view_link(self, view: str) -> str:
        """Query string of the same table in another view (filter, grouping and sort kept)."""
        return "?" + self.query(view=view)

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
        params |= {"view": self.view, "by_module": int(self.by_module)}
        params.update(override)
        if params["view"] == DEFAULT_OP_VIEW:  # the default view's links read as before views existed
            del params["view"]
        return urlencode({k: v for k, v in params.items() if v not in ("", None, 0) or k == "sort"})


@dataclass
class TimelinePage:
    """`/runs/{id}/timeline`; the canvas pulls `/api/runs/{id}/timeline` windows itself."""

    run: dict[str, Any]
    span_ns: int
    twin: str = ""


@dataclass
class ComparePage:
    """`/compare?runs=a,b,c&baseline=a`; twin `/api/compare` with the same query. `compare` lists the
    baseline run first (explorer.analysis.compare.choose_baseline says which and why)."""

    compare: dict[str, Any]
    figure: dict[str, Any]
    twin: str = ""

    @property
    def metric(self) -> str:
        return str(self.compare["headline"]["metric"])

    @property
    def headline(self) -> dict[str, Any]:
        """compute_headline's object, the one /api/compare carries."""
        return dict(self.compare["headline"])

    def baseline_link(self, run_id: str) -> str:
        """This comparison with `run_id` as the baseline (first, and chosen in the link)."""
        ids = [r["id"] for r in self.compare["runs"]]
        return "/compare?" + compare_query([run_id, *(i for i in ids if i != run_id)], run_id)


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
    top_device, top_cpu = overview_top_ops(store, run_id)
    figures = {"lanes": make_lane_breakdown_figure(bd),
               "top_device": make_top_ops_figure(top_device, "self_device_ns"),
               "top_cpu": make_top_ops_figure(top_cpu, "self_cpu_ns")}
    if not top_device:  # a host-only profile: inclusive CPU time says more than an empty device chart
        figures["top_device"] = make_top_ops_figure(load_ops(store, run_id, sort="-cpu_total_ns", limit=TOP_OPS),
                                                    "cpu_total_ns", title="No device time: top ops by CPU total")
    return OverviewPage(run_json(rec), bd, top_device, top_cpu, figures, f"/api/runs/{run_id}")


def overview_top_ops(store: RunStore, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The overview's two charts, both of the operators view: top by self device time (ops with some),
    and top by self CPU time."""
    by_device = load_ops(store, run_id, sort="-self_device_ns", limit=TOP_OPS, view="operators")
    return ([r for r in by_device if r["self_device_ns"] > 0],
            load_ops(store, run_id, sort="-self_cpu_ns", limit=TOP_OPS, view="operators"))


def build_ops_page(store: RunStore, run_id: str, sort: str | None = None, q: str = "", by_shape: bool = False,
                   limit: int | None = None, view: str = DEFAULT_OP_VIEW, by_module: bool = False) -> OpsPage:
    rec = store.require_ready(run_id)
    device_total = run_device_total_ns(rec)
    sort = sort or default_op_sort(device_total)
    check_op_view(view)
    has_modules = has_module_frames(store, run_id)
    by_module = by_module and has_modules
    if sort.lstrip("-+") not in (*OP_COLUMNS, *(("module",) if by_module else ())):
        raise BadRequest(f"cannot sort by {sort!r}; columns: {', '.join(OP_COLUMNS)}")
    rows = load_ops(store, run_id, sort=sort, limit=limit, by_shape=by_shape, name_filter=q, view=view,
                    by_module=by_module)
    page = OpsPage(run_json(rec), rows, device_total, sort, q, by_shape, limit,
                   make_top_ops_figure(rows, ops_chart_metric(sort, device_total)), view, by_module, has_modules)
    page.twin = f"/api/runs/{run_id}/ops?{page.query()}"
    return page


def ops_chart_metric(sort: str, device_total_ns: int) -> str:
    """The ops page's chart follows the table: its sort column when that is a time, else the default's."""
    key = sort.lstrip("-+")
    return key if key in OP_TIME_COLUMNS else default_op_sort(device_total_ns).lstrip("-")


def build_timeline_page(store: RunStore, run_id: str) -> TimelinePage:
    rec = store.require_ready(run_id)
    span = int(rec.summary.get("span_ns", 0))
    return TimelinePage(run_json(rec), span,
                        f"/api/runs/{run_id}/timeline?start_ns=0&end_ns={max(span, 1)}&width_px=2000")


def compare_query(run_ids: list[str], baseline: str | None = None) -> str:
    """The query string of a compare page and its twin: `runs=a,b` plus `baseline=` when one is chosen."""
    params = {"runs": ",".join(run_ids), **({"baseline": baseline} if baseline else {})}
    return urlencode(params, safe=",")


def compute_run_compare(store: RunStore, run_ids: list[str], baseline: str | None = None) -> dict[str, Any]:
    """The `/api/compare` object for stored runs: ops from the op table's operators view, kernels from
    the slices table."""
    if not 2 <= len(run_ids) <= MAX_COMPARE_RUNS:
        raise BadRequest(f"compare takes 2 to {MAX_COMPARE_RUNS} run ids, comma-separated: /compare?runs=a,b")
    if len(set(run_ids)) != len(run_ids):
        raise BadRequest("a run appears twice in the comparison")
    sides = []
    for rid in run_ids:
        rec = store.require_ready(rid)
        # the operators view: python frames (with_stack) would bury the ops under recursive frames
        sides.append(RunOps(rec.id, rec.name, select_op_view(op_table(store, rid), DEFAULT_OP_VIEW),
                            int(rec.summary.get("device", {}).get("device_total_ns", 0)), tuple(rec.tags),
                            kernel_table(store.table(rid, "slices"))))
    return compute_compare(sides, baseline)


def build_compare_page(store: RunStore, run_ids: list[str], baseline: str | None = None) -> ComparePage:
    data = compute_run_compare(store, run_ids, baseline)
    return ComparePage(data, make_compare_figure(data), "/api/compare?" + compare_query(run_ids, baseline))


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
            "details": snapshot_details(store, run_id, ids), **snapshot_rules(store, run_id, ix),
            "chains": snapshot_chains(store, run_id, ids, origin)}


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
