"""Page data, computed once and rendered twice: each `build_*_page` returns the typed context of one
HTML page, holding the very object its JSON twin returns (datasette's `View.data()`); each `compute_*`
is that object, shared by the page and its API route. Shapes: explorer.model.shapes.

Nothing here knows about HTTP or formats a number; the offline report (explorer.report) builds on these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from explorer.analysis.breakdown import compute_breakdown
from explorer.analysis.collectives import (
    DEFAULT_SORT as COLLECTIVES_SORT,
)
from explorer.analysis.collectives import (
    TEXT_SORTS as COLLECTIVE_TEXT_SORTS,
)
from explorer.analysis.collectives import (
    args_names,
    collective_links,
    collective_row,
    collectives_result,
    compute_collectives,
)
from explorer.analysis.compare import RunOps, compute_compare, kernel_table, median_step_ns
from explorer.analysis.kernels import (
    CATEGORY_RULES,
    DEFAULT_KERNEL_SORT,
    KernelTable,
    compute_kernel_table,
    sort_descending,
    sort_kernel_rows,
)
from explorer.analysis.lod import TimelineIndex, build_timeline_index
from explorer.analysis.lod_budget import display_order
from explorer.analysis.lod_files import FILES_FROM_SLICES, INDEX_DIR, load_timeline_index, save_timeline_index
from explorer.analysis.steps import DEFAULT_STEP_ANNOTATION, compute_steps
from explorer.charts import (
    make_compare_figure,
    make_kernel_category_figure,
    make_lane_breakdown_figure,
    make_steps_figure,
    make_top_kernels_figure,
    make_top_ops_figure,
)
from explorer.errors import BadRequest
from explorer.model.advice_shapes import Finding, FindingChange
from explorer.model.lanes import Lane
from explorer.model.rank_slices import RankSlices, check_ranks, parse_ranks, restrict_to_ranks
from explorer.model.ranks import run_ranks, track_ranks
from explorer.model.shapes import (
    Breakdown,
    CollectiveLinks,
    CollectiveMismatch,
    CollectiveRow,
    CollectivesResult,
    CompareResult,
    Headline,
    KernelCategory,
    KernelRow,
    KernelsResult,
    OpRow,
    OpsResult,
    RatesBasis,
    RunJson,
    RunLinks,
    RunList,
    SqlSchema,
    StepsResult,
    Tracks,
)
from explorer.model.source_links import SourceLinker, parse_frame
from explorer.store.catalog import RunRecord
from explorer.store.queries import (
    DEFAULT_OP_VIEW,
    OP_TIE_BREAK,
    OP_TIME_COLUMNS,
    OP_VIEWS,
    attributed_device_ns,
    check_op_view,
    default_op_sort,
    has_module_frames,
    load_ops,
    op_sort_descending,
    op_table,
    rank_device_total_ns,
    run_device_total_ns,
    select_op_view,
)
from explorer.store.run_queries import load_ops_in_range
from explorer.store.runs import RunStore
from explorer.store.sql import load_sql_schema
from explorer.views.rates import add_op_work, with_kernel_work  # issue 37

KERNEL_CATEGORIES = tuple(dict.fromkeys(rule.category for rule in CATEGORY_RULES))
TOP_OPS = 15
MAX_COMPARE_RUNS = 8
RUNS_PAGE_LIMIT = 1000
# rows per page of the op and kernel tables (the browser sorts, filters and pages the rest); 100 keeps a
# sort's redraw within a frame or two on the dev box, 200 did not (bench/ui.py)
TABLE_PAGE_ROWS = 100


def run_links(run_id: str) -> RunLinks:
    api = f"/api/runs/{run_id}"
    return {"self": api, "page": f"/runs/{run_id}", "tracks": f"{api}/tracks", "timeline": f"{api}/timeline",
            "ops": f"{api}/ops", "breakdown": f"{api}/breakdown", "search": f"{api}/search", "sql": f"{api}/sql"}


def run_json(rec: RunRecord) -> RunJson:
    """A run as the API's `Run` object (docs/API.md; tests pin it equal to GET /api/runs/{id})."""
    return {"id": rec.id, "name": rec.name, "status": rec.status, "progress": rec.progress,
            "message": rec.message, "tags": rec.tags, "created_at": rec.created_at, "sha256": rec.sha256,
            "source": rec.source, "summary": rec.summary.stored(), "links": run_links(rec.id)}


@dataclass
class RunsPage:
    """`/` and its twin `/api/runs`."""

    runs: list[RunJson]
    total: int
    twin: str = "/api/runs"


@dataclass
class NotReadyPage:
    """Any run page of a run still ingesting, or failed; twin `/api/runs/{id}`."""

    run: RunJson
    twin: str = ""


@dataclass
class OverviewPage:
    """`/runs/{id}`; twins `/api/runs/{id}` and `/api/runs/{id}/breakdown`."""

    run: RunJson
    breakdown: Breakdown
    top_device: list[OpRow]
    top_cpu: list[OpRow]
    figures: dict[str, dict[str, Any]]
    twin: str = ""
    rank: str = ""  # the `rank=` filter of the breakdown as given ("" every rank)
    ranks: list[int] = field(default_factory=list)  # the run's ranks (the filter is offered when several)
    findings: list[Finding] = field(default_factory=list)  # the advisor's top findings (explorer.views.advice)

    @property
    def device_busy_pct(self) -> float | None:
        return device_busy_pct(self.breakdown)


def device_busy_pct(breakdown: Breakdown) -> float | None:
    """The busiest device's busy % (the overview's card and compare's host-bound test), else the hardware
    lane's; None without device time."""
    devices = breakdown["devices"]
    if devices:
        return max(float(d["busy_pct"]) for d in devices)
    hw = [r for r in breakdown["lanes"] if r["lane"] == Lane.HARDWARE]
    return float(hw[0]["busy_pct"]) if hw else None


class SortLinks:
    """The sort and page links of a table page; `sort_descending` is its table's rule for a bare column
    (the page hands it to static/js/tables.js as data-desc, so a sort in the browser agrees)."""

    sort: str
    rows: list[Any]
    page: int
    page_size = TABLE_PAGE_ROWS
    tie_break: tuple[str, ...] = ("name",)  # the columns that order rows equal in the sort column

    def sort_descending(self, sort: str) -> bool:
        raise NotImplementedError

    def query(self, **override: Any) -> str:
        raise NotImplementedError

    @property
    def descending(self) -> bool:
        return self.sort_descending(self.sort)

    def sort_link(self, column: str) -> str:
        """Query string sorting by `column`: numbers first descending, text ascending; the sorted
        column flips."""
        desc = not self.descending if self.sort.lstrip("-+") == column else self.sort_descending(column)
        return "?" + self.query(sort=("-" if desc else "+") + column, page=None)

    @property
    def page_count(self) -> int:
        return max(1, -(-len(self.rows) // self.page_size))

    @property
    def page_rows(self) -> list[Any]:
        """The rows of the page shown (a page past the end shows the last one)."""
        start = (min(self.page, self.page_count) - 1) * self.page_size
        return self.rows[start:start + self.page_size]

    def page_link(self, page: int) -> str:
        return "?" + self.query(page=page if page > 1 else None)


@dataclass
class OpsPage(SortLinks):
    """`/runs/{id}/ops?sort=&q=&by_shape=&limit=`; twin `/api/runs/{id}/ops` with the same query."""

    run: RunJson
    rows: list[OpRow]
    device_total_ns: int
    sort: str
    q: str
    by_shape: bool
    limit: int | None
    figure: dict[str, Any]
    view: str = DEFAULT_OP_VIEW
    attributed_ns: int = 0  # device time the operators view's rows sum to (OpsResult.attributed_ns)
    by_module: bool = False
    has_modules: bool = False  # the run has nn.Module frames (with_modules): grouping by module is offered
    twin: str = ""
    views: tuple[str, ...] = tuple(OP_VIEWS)
    page: int = 1
    rank: str = ""  # the `rank=` filter as given ("" every rank)
    ranks: list[int] = field(default_factory=list)  # the run's ranks (the filter is offered when several)
    rates: RatesBasis | None = None  # issue 37: what the rows' `work` rates compare with

    def view_link(self, view: str) -> str:
        """Query string of the same table in another view (filter, grouping and sort kept; back to page 1)."""
        return "?" + self.query(view=view, page=None)

    tie_break = OP_TIE_BREAK

    def sort_descending(self, sort: str) -> bool:
        return op_sort_descending(sort)

    def query(self, **override: Any) -> str:
        params: dict[str, Any] = {"sort": self.sort, "q": self.q, "by_shape": int(self.by_shape)}
        if self.limit is not None:
            params["limit"] = self.limit
        params |= {"view": self.view, "by_module": int(self.by_module), "page": self.page if self.page > 1 else None,
                   "rank": self.rank}
        params.update(override)
        if params["view"] == DEFAULT_OP_VIEW:  # the default view's links read as before views existed
            del params["view"]
        return urlencode({k: v for k, v in params.items() if v not in ("", None, 0) or k == "sort"})


@dataclass
class KernelsPage(SortLinks):
    """`/runs/{id}/kernels?sort=&q=&category=&limit=`; twin `/api/runs/{id}/kernels` with the same query."""

    run: RunJson
    rows: list[KernelRow]
    device_total_ns: int
    categories: list[KernelCategory]  # the whole run's breakdown, whatever the filter
    sort: str
    q: str
    category: str
    limit: int | None
    figures: dict[str, dict[str, Any]]
    twin: str = ""
    page: int = 1
    rank: str = ""  # the `rank=` filter as given ("" every rank)
    ranks: list[int] = field(default_factory=list)  # the run's ranks (the filter is offered when several)
    rates: RatesBasis | None = None  # issue 37: what the rows' `work` rates compare with

    def sort_descending(self, sort: str) -> bool:
        return sort_descending(sort)

    def query(self, **override: Any) -> str:
        params: dict[str, Any] = {"sort": self.sort, "q": self.q, "category": self.category, "limit": self.limit,
                                  "page": self.page if self.page > 1 else None, "rank": self.rank}
        params.update(override)
        return urlencode({k: v for k, v in params.items() if v not in ("", None) or k == "sort"})


@dataclass
class TimelinePage:
    """`/runs/{id}/timeline`; the canvas pulls `/api/runs/{id}/timeline` windows itself."""

    run: RunJson
    span_ns: int
    twin: str = ""


@dataclass
class ComparePage:
    """`/compare?runs=a,b,c&baseline=a`; twin `/api/compare` with the same query. `compare` lists the
    baseline run first (explorer.analysis.compare.choose_baseline says which and why)."""

    compare: CompareResult
    figure: dict[str, Any]
    twin: str = ""
    findings: list[FindingChange] = field(default_factory=list)  # advisor findings gained/lost vs the baseline

    @property
    def metric(self) -> str:
        return str(self.compare["headline"]["metric"])

    @property
    def headline(self) -> Headline:
        """compute_headline's object, the one /api/compare carries."""
        return self.compare["headline"]

    def baseline_link(self, run_id: str) -> str:
        """This comparison with `run_id` as the baseline (first, and chosen in the link)."""
        ids = [r["id"] for r in self.compare["runs"]]
        return "/compare?" + compare_query([run_id, *(i for i in ids if i != run_id)], run_id)


@dataclass
class SqlPage:
    """`/runs/{id}/sql?q=...`: the editor, the schema beside it; twin `/api/runs/{id}/sql/schema`. The page
    runs `q` itself (POST /api/runs/{id}/sql) and then points its twin link at the result,
    `/api/runs/{id}/sql?q=...`."""

    run: RunJson
    schema: SqlSchema
    q: str
    twin: str = ""


# ---- builders: one per page; `compute_*` is the JSON twin's object ------------------------------

def compute_run_list(store: RunStore, name: str | None = None, tag: str | None = None, status: str | None = None,
                     limit: int = 50, offset: int = 0) -> RunList:
    """The `/api/runs` object: runs newest first, filtered by name substring, tag and status."""
    records, total = store.catalog.list(name=name, tag=tag, status=status, limit=limit, offset=offset)
    return {"runs": [run_json(r) for r in records], "total": total, "limit": limit, "offset": offset}


def build_runs_page(store: RunStore, name: str = "", tag: str = "") -> RunsPage:
    data = compute_run_list(store, name=name or None, tag=tag or None, limit=RUNS_PAGE_LIMIT)
    q = urlencode({k: v for k, v in (("name", name), ("tag", tag)) if v})
    return RunsPage(data["runs"], data["total"], "/api/runs" + (f"?{q}" if q else ""))


def compute_run_breakdown(store: RunStore, run_id: str, ranks: tuple[int, ...] | None = None) -> Breakdown:
    """The lane breakdown of a run, or of some of its ranks (busy time theirs, idle against the run's span,
    gap neighbours named by their slice ids in the run)."""
    s = store.require_ready(run_id).summary
    t = store.table
    if ranks is None:
        return compute_breakdown(t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "flows"), s.start_ns, s.end_ns)
    sub = rank_subset(store, run_id, ranks, t(run_id, "flows"))
    result = compute_breakdown(sub.slices, sub.tracks, sub.flows, s.start_ns, s.end_ns)
    for gap in result["gaps"]["largest"]:
        for side in ("before", "after"):
            gap[side]["slice_id"] = int(sub.kept[gap[side]["slice_id"]])
    return result


def rank_subset(store: RunStore, run_id: str, ranks: tuple[int, ...], flows: pa.Table | None = None) -> RankSlices:
    """The cached slice columns of some ranks of a run, renumbered as a run of their own; a rank the run
    does not have is a BadRequest."""
    tracks = store.table(run_id, "tracks")
    check_ranks(ranks, run_ranks(tracks))
    return restrict_to_ranks(store.table(run_id, "slices"), tracks, flows, ranks)


def build_overview(store: RunStore, run_id: str, breakdown: Breakdown | None = None, rank: str = "") -> OverviewPage:
    """`breakdown` of the ranks `rank` names when given (the top-op charts stay the whole run's)."""
    rec = store.require_ready(run_id)
    bd = breakdown if breakdown is not None else compute_run_breakdown(store, run_id)
    top_device, top_cpu = overview_top_ops(store, run_id)
    figures = {"lanes": make_lane_breakdown_figure(bd),
               "top_device": make_top_ops_figure(top_device, "self_device_ns"),
               "top_cpu": make_top_ops_figure(top_cpu, "self_cpu_ns")}
    if not top_device:  # a host-only profile: inclusive CPU time says more than an empty device chart
        figures["top_device"] = make_top_ops_figure(load_ops(store, run_id, sort="-cpu_total_ns", limit=TOP_OPS),
                                                    "cpu_total_ns", title="No device time: top ops by CPU total")
    return OverviewPage(run_json(rec), bd, top_device, top_cpu, figures, f"/api/runs/{run_id}",
                        rank, run_ranks(store.table(run_id, "tracks")))


def overview_top_ops(store: RunStore, run_id: str) -> tuple[list[OpRow], list[OpRow]]:
    """The overview's two charts, both of the operators view: top by self device time (ops with some; the
    Python frames and runtime calls that launched device work outside any op are rows there too, so no
    device time is left out), and top by self CPU time."""
    by_device = load_ops(store, run_id, sort="-self_device_ns", limit=TOP_OPS, view="operators")
    return ([r for r in by_device if r["self_device_ns"] > 0],
            load_ops(store, run_id, sort="-self_cpu_ns", limit=TOP_OPS, view="operators"))


def compute_run_ops(store: RunStore, rec: RunRecord, sort: str | None = None, q: str = "", by_shape: bool = False,
                    limit: int | None = None, view: str = DEFAULT_OP_VIEW, by_module: bool = False,
                    start_ns: int | None = None, end_ns: int | None = None,
                    links: SourceLinker | None = None, ranks: tuple[int, ...] | None = None) -> OpsResult:
    """The `/api/runs/{id}/ops` object: one view's rows in `sort` order (default_op_sort's rule when None);
    start_ns/end_ns (relative) keep the ops that start in that range; `ranks` keeps those ranks' slices;
    with `links`, Python frame rows get their `source_url`."""
    device_total = run_device_total_ns(rec) if ranks is None else rank_device_total_ns(store, rec.id, ranks)
    check_op_view(view)
    sort = sort or default_op_sort(device_total, view)
    if start_ns is None and end_ns is None:
        rows = load_ops(store, rec.id, sort=sort, limit=limit, by_shape=by_shape, name_filter=q, view=view,
                        by_module=by_module, ranks=ranks)
    else:
        origin = rec.summary.start_ns
        start = origin + (start_ns or 0)
        end = origin + (end_ns if end_ns is not None else rec.summary.span_ns + 1)
        rows = load_ops_in_range(store, rec.id, start, end, sort=sort, limit=limit, by_shape=by_shape,
                                 name_filter=q, view=view, by_module=by_module, ranks=ranks)
    for row in rows if links is not None else []:
        url = links.url(parse_frame(row["name"])) if links is not None and row["kind"] == "python" else None
        if url:
            row["source_url"] = url
    rates = add_op_work(store, rec, rows, by_shape, device_total, ranks)  # issue 37: rates (explorer.views.rates)
    return {"rows": rows, "device_total_ns": device_total, "attributed_ns": attributed_device_ns(store, rec, ranks),
            "view": view, "sort": sort, "has_modules": has_module_frames(store, rec.id), "rates": rates}


def build_ops_page(store: RunStore, run_id: str, sort: str | None = None, q: str = "", by_shape: bool = False,
                   limit: int | None = None, view: str = DEFAULT_OP_VIEW, by_module: bool = False,
                   links: SourceLinker | None = None, page: int = 1, rank: str = "") -> OpsPage:
    """Grouping by module is offered (and honoured) only for runs that have nn.Module frames."""
    rec = store.require_ready(run_id)
    has_modules = has_module_frames(store, run_id)
    data = compute_run_ops(store, rec, sort, q, by_shape, limit, view, by_module and has_modules, links=links,
                           ranks=parse_ranks(rank))
    ops_page = OpsPage(run_json(rec), data["rows"], data["device_total_ns"], data["sort"], q, by_shape, limit,
                       make_top_ops_figure(data["rows"], ops_chart_metric(data["sort"], data["device_total_ns"],
                                                                          data["view"])),
                       data["view"], data["attributed_ns"], by_module and has_modules, data["has_modules"], rank=rank,
                       ranks=run_ranks(store.table(run_id, "tracks")), rates=data.get("rates"))
    ops_page.page = max(1, page)
    ops_page.twin = f"/api/runs/{run_id}/ops?{ops_page.query()}"
    return ops_page


def ops_chart_metric(sort: str, device_total_ns: int, view: str = DEFAULT_OP_VIEW) -> str:
    """The ops page's chart follows the table: its sort column when that is a time, else the view's default."""
    key = sort.lstrip("-+")
    return key if key in OP_TIME_COLUMNS else default_op_sort(device_total_ns, view).lstrip("-")


def build_timeline_page(store: RunStore, run_id: str) -> TimelinePage:
    rec = store.require_ready(run_id)
    span = rec.summary.span_ns
    return TimelinePage(run_json(rec), span,
                        f"/api/runs/{run_id}/timeline?start_ns=0&end_ns={max(span, 1)}&width_px=2000")


def compare_query(run_ids: list[str], baseline: str | None = None) -> str:
    """The query string of a compare page and its twin: `runs=a,b` plus `baseline=` when one is chosen."""
    params = {"runs": ",".join(run_ids), **({"baseline": baseline} if baseline else {})}
    return urlencode(params, safe=",")


def compute_run_compare(store: RunStore, run_ids: list[str], baseline: str | None = None) -> CompareResult:
    """The `/api/compare` object for stored runs: ops from the op table's operators view, kernels from
    the slices table."""
    if not 2 <= len(run_ids) <= MAX_COMPARE_RUNS:
        raise BadRequest(f"compare takes 2 to {MAX_COMPARE_RUNS} run ids, comma-separated: /compare?runs=a,b")
    if len(set(run_ids)) != len(run_ids):
        raise BadRequest("a run appears twice in the comparison")
    return compute_compare([compare_side(store, rid) for rid in run_ids], baseline)


def compare_side(store: RunStore, run_id: str) -> RunOps:
    """One stored run's side of a comparison: its operators view (python frames, with_stack, would bury
    the ops under recursive frames), kernels, span, median step, busiest device and device models."""
    rec = store.require_ready(run_id)
    s, slices, tracks = rec.summary, store.table(run_id, "slices"), store.table(run_id, "tracks")
    steps = compute_steps(slices, s.start_ns, s.end_ns)
    busy = device_busy_pct(compute_breakdown(slices, tracks, store.table(run_id, "flows"), s.start_ns, s.end_ns, top=0))
    sizes = [f["distributed_info"].get("world_size") for f in s.files if isinstance(f.get("distributed_info"), dict)]
    world = max((w for w in sizes if isinstance(w, int) and not isinstance(w, bool)), default=None)
    return RunOps(rec.id, rec.name, select_op_view(op_table(store, run_id), DEFAULT_OP_VIEW), run_device_total_ns(rec),
                  tuple(rec.tags), kernel_table(slices), span_ns=s.span_ns, step_ns=median_step_ns(steps),
                  step_count=steps["count"], step_annotation=steps["annotation"] if steps["count"] else "", busy_pct=busy,
                  devices=[d.model_dump(mode="json") for d in s.devices],
                  world_size=world if world is not None else max(1, len(run_ranks(tracks))))


def build_compare_page(store: RunStore, run_ids: list[str], baseline: str | None = None) -> ComparePage:
    data = compute_run_compare(store, run_ids, baseline)
    return ComparePage(data, make_compare_figure(data), "/api/compare?" + compare_query(run_ids, baseline))


def build_tracks(store: RunStore, run_id: str, offset: int = 0, limit: int | None = None) -> Tracks:
    """The `/api/runs/{id}/tracks` object: every column of the tracks table (sort_key included: the
    timeline orders tracks by it within a lane), `total` of them. With `limit`, one page of the tracks in
    the timeline's order (a run of a million thread ids lists in milliseconds). Runs stored before the rank
    column get it read from their instance labels (explorer.model.ranks)."""
    rec = store.require_ready(run_id)
    table = store.table(run_id, "tracks")
    total = table.num_rows
    if limit is not None:
        table = table.take(pa.array(display_order(table)[offset:offset + limit]))
    rows: Any = table.to_pylist()
    if "rank" not in table.column_names:
        for row, rank in zip(rows, track_ranks(table).tolist(), strict=True):
            row["rank"], row["host"] = int(rank), ""
    return {"origin_ns": rec.summary.start_ns, "tracks": rows, "total": total}


# ---- kernels ----------------------------------------------------------------------------------

def compute_run_kernels(store: RunStore, run_id: str, ranks: tuple[int, ...] | None = None) -> KernelTable:
    """The kernel table of a stored run (or of some of its ranks): the cached slice columns plus the args
    of its device executions, read from Parquet (only those rows' args)."""
    rec = store.require_ready(run_id)
    args = pq.read_table(store.table_path(run_id, "slices"), columns=["args", "track_id"],
                         filters=[("device_time", "=", True)])
    if ranks is None:
        table = compute_kernel_table(store.table(run_id, "slices"), args.column("args"))
        return with_kernel_work(table, store, rec)  # issue 37: achieved rates (explorer.views.rates)
    sub = rank_subset(store, run_id, ranks)
    mine = np.isin(args.column("track_id").to_numpy(), sub.tracks.column("track_id").to_numpy())
    table = compute_kernel_table(sub.slices, args.column("args").filter(pa.array(mine)))
    return with_kernel_work(table, store, rec, sub.tracks.column("track_id").combine_chunks())


def kernels_json(kernels: KernelTable, sort: str = DEFAULT_KERNEL_SORT, q: str = "", category: str = "",
                 limit: int | None = None) -> KernelsResult:
    """The `/api/runs/{id}/kernels` object; the kernels page holds the same rows."""
    if category and category not in KERNEL_CATEGORIES:
        raise BadRequest(f"no kernel category {category!r}; categories: {', '.join(KERNEL_CATEGORIES)}")
    rows = sort_kernel_rows(kernels.table, sort, limit, q, category)
    for row in rows:  # issue 37: the work of the ops that launched them (explorer.views.rates)
        row["work"] = kernels.work.get(row["name"])
    out: KernelsResult = {"rows": rows, "device_total_ns": kernels.device_total_ns, "categories": kernels.categories}
    if kernels.rates is not None:
        out["rates"] = kernels.rates
    return out


def build_kernels_page(store: RunStore, run_id: str, sort: str = DEFAULT_KERNEL_SORT, q: str = "", category: str = "",
                       limit: int | None = None, kernels: KernelTable | None = None, page: int = 1,
                       rank: str = "") -> KernelsPage:
    """A server passes its cached `kernels` (of the `rank=` filter's ranks); without them they are computed here."""
    rec = store.require_ready(run_id)
    data = kernels_json(kernels or compute_run_kernels(store, run_id, parse_ranks(rank)), sort, q, category, limit)
    figures = {"top": make_top_kernels_figure(data["rows"]), "categories": make_kernel_category_figure(data["categories"])}
    kernels_page = KernelsPage(run_json(rec), data["rows"], data["device_total_ns"], data["categories"], sort, q,
                               category, limit, figures, page=max(1, page), rank=rank,
                               ranks=run_ranks(store.table(run_id, "tracks")), rates=data.get("rates"))
    kernels_page.twin = f"/api/runs/{run_id}/kernels?{kernels_page.query()}"
    return kernels_page


@dataclass
class StepsPage:
    """`/runs/{id}/steps?annotation=`; twin `/api/runs/{id}/steps` with the same query."""

    run: RunJson
    steps: StepsResult
    figures: dict[str, dict[str, Any]]
    twin: str = ""


def compute_run_steps(store: RunStore, run_id: str, annotation: str = DEFAULT_STEP_ANNOTATION) -> StepsResult:
    """The `/api/runs/{id}/steps` object: one row per (rank, step) on a multi-rank run, each rank's own device time."""
    s = store.require_ready(run_id).summary
    return compute_steps(store.table(run_id, "slices"), s.start_ns, s.end_ns, annotation, store.table(run_id, "tracks"))


def build_steps_page(store: RunStore, run_id: str, annotation: str = DEFAULT_STEP_ANNOTATION) -> StepsPage:
    rec = store.require_ready(run_id)
    data = compute_run_steps(store, run_id, annotation)
    q = "" if annotation == DEFAULT_STEP_ANNOTATION else "?" + urlencode({"annotation": annotation})
    return StepsPage(run_json(rec), data, {"steps": make_steps_figure(data)}, f"/api/runs/{run_id}/steps{q}")


def build_sql_page(store: RunStore, run_id: str, q: str = "") -> SqlPage:
    rec = store.require_ready(run_id)
    return SqlPage(run_json(rec), load_sql_schema(store, run_id), q, f"/api/runs/{run_id}/sql/schema")


# ---- collectives matched across ranks ------------------------------------------------------------

@dataclass
class RunCollectives:
    """A run's matched collectives (API rows, relative ns) and mismatches, computed once per run."""

    rows: list[CollectiveRow]
    mismatches: list[CollectiveMismatch]


def compute_run_collectives(store: RunStore, run_id: str) -> RunCollectives:
    """Match a stored run's collectives: the cached slice columns plus the args of the executions only
    (read from Parquet by name); a single-file run's tracks take its distributedInfo rank."""
    rec = store.require_ready(run_id)
    slices = store.table(run_id, "slices")
    names = args_names(slices)
    args: dict[int, str] = {}
    if names:
        t = pq.read_table(store.table_path(run_id, "slices"), columns=["slice_id", "args"],
                          filters=[("name", "in", names)])
        args = dict(zip(t.column("slice_id").to_pylist(), t.column("args").to_pylist(), strict=True))
    ranks = [f.get("distributed_info", {}).get("rank") for f in rec.summary.files
             if isinstance(f.get("distributed_info"), dict)]
    default_rank = ranks[0] if len(ranks) == 1 and isinstance(ranks[0], int) else 0
    matched, mismatches = compute_collectives(slices, args, store.table(run_id, "flows"),
                                              store.table(run_id, "tracks"), default_rank)
    s = rec.summary
    return RunCollectives([collective_row(m, s.start_ns, s.span_ns) for m in matched], mismatches)


def collectives_json(colls: RunCollectives, sort: str = COLLECTIVES_SORT, limit: int | None = None) -> CollectivesResult:
    """The `/api/runs/{id}/collectives` object; the collectives page holds the same rows."""
    return collectives_result(colls.rows, colls.mismatches, sort, limit)


def collective_links_json(colls: RunCollectives, start_ns: int, end_ns: int) -> CollectiveLinks:
    """`/api/runs/{id}/collectives/links`: the matched collectives in a window, as the ranks' slice ids."""
    if end_ns <= start_ns:
        raise BadRequest(f"end_ns ({end_ns}) must be greater than start_ns ({start_ns})")
    return {"links": collective_links(colls.rows, start_ns, end_ns)}


@dataclass
class CollectivesPage(SortLinks):
    """`/runs/{id}/collectives?sort=&limit=`; twin `/api/runs/{id}/collectives` with the same query."""

    run: RunJson
    data: CollectivesResult
    sort: str
    limit: int | None
    twin: str = ""
    rows: list[CollectiveRow] = field(default_factory=list)  # data["rows"], the table (one page: no paging)
    page: int = 1

    def __post_init__(self) -> None:
        self.rows = self.data["rows"]

    def sort_descending(self, sort: str) -> bool:
        return sort.startswith("-") or (sort.lstrip("-+") not in COLLECTIVE_TEXT_SORTS and not sort.startswith("+"))

    def query(self, **override: Any) -> str:
        params: dict[str, Any] = {"sort": self.sort, "limit": self.limit} | override
        return urlencode({k: v for k, v in params.items() if v is not None and k != "page"})


def build_collectives_page(store: RunStore, run_id: str, sort: str = COLLECTIVES_SORT, limit: int | None = None,
                           colls: RunCollectives | None = None) -> CollectivesPage:
    """A server passes its cached `colls`; without them they are computed here."""
    rec = store.require_ready(run_id)
    data = collectives_json(colls or compute_run_collectives(store, run_id), sort, limit)
    page = CollectivesPage(run_json(rec), data, sort, limit)
    page.twin = f"/api/runs/{run_id}/collectives?{page.query()}"
    return page


def timeline_index(store: RunStore, run_id: str, origin_ns: int) -> TimelineIndex:
    """The run's timeline index, mapped from the run's folder where it is stored there (explorer/analysis/lod_files.py:
    no build, and its pages are the page cache's), else built from the run's tables (seconds on millions of slices):
    into the run's folder, where the store keeps indexes as files (RunStore.index_files, "first_build") and the run is
    big enough for it to matter (FILES_FROM_SLICES), else in memory. Not cached here: the caller keeps it (a
    server's RunMemo)."""
    stored = load_timeline_index(store.run_dir(run_id) / INDEX_DIR, origin_ns)
    if stored is not None:
        return stored
    t = store.table
    tables = (t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "counters"), t(run_id, "flows"))
    instants = t(run_id, "instants")
    if store.index_files == "first_build" and tables[0].num_rows >= FILES_FROM_SLICES:
        folder = store.add_to_run(run_id, INDEX_DIR, lambda f: save_timeline_index(f, *tables, origin_ns, instants))
        if folder is not None and (written := load_timeline_index(folder, origin_ns)) is not None:
            return written
    return build_timeline_index(*tables, origin_ns, instants)
