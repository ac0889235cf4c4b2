"""The op table (`/runs/{id}/ops`, twin `/api/runs/{id}/ops`), like torch's `key_averages()`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from explorer.analysis.rank_slices import parse_ranks
from explorer.model.shapes import (
    OpMemorySummary,
    OpRow,
    OpsResult,
    RatesBasis,
    RunJson,
)
from explorer.model.source_links import SourceLinker, parse_frame
from explorer.runs.run import Run
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
    rank_device_total_ns,
    run_device_total_ns,
)
from explorer.store.run_queries import load_ops_in_range
from explorer.views.charts import (
    make_top_ops_figure,
)
from explorer.views.links import run_json
from explorer.views.op_memory import add_op_memory, is_memory_sort, run_op_memory, sort_memory_rows
from explorer.views.rates import add_op_work
from explorer.views.tables import SortLinks


@dataclass(frozen=True)
class OpsQuery:
    """The op table's query, one for the page and its JSON twin (api/deps.py OpsQueryDep)."""

    sort: str | None = None  # None: default_op_sort's rule
    q: str = ""  # name substring
    by_shape: bool = False
    limit: int | None = None
    view: str = DEFAULT_OP_VIEW
    by_module: bool = False
    rank: str = ""  # `rank=0,3` as given ("" every rank)
    start_ns: int | None = None  # relative ns: keep the ops that start in [start_ns, end_ns)
    end_ns: int | None = None
    page: int = 1
    memory_device: str = ""  # the device whose [memory] events the memory columns show ("" the highest peak)

    @property
    def ranks(self) -> tuple[int, ...] | None:
        return parse_ranks(self.rank)


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
    start_ns: int | None = None  # the window the rows start in (relative ns), None: the whole run
    end_ns: int | None = None
    memory: OpMemorySummary | None = None  # the memory columns' device and totals (None: no columns)
    memory_device: str = ""  # the `memory_device=` asked for ("" the highest peak)
    rates: RatesBasis | None = None  # what the rows' `work` rates compare with (explorer.views.rates)

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
                   "rank": self.rank, "start_ns": self.start_ns, "end_ns": self.end_ns,
                   "memory_device": self.memory_device}
        params.update(override)
        if params["view"] == DEFAULT_OP_VIEW:  # the default view's links read as before views existed
            del params["view"]
        return urlencode({k: v for k, v in params.items() if v not in ("", None, 0) or k == "sort"})


def compute_run_ops(run: Run, query: OpsQuery = OpsQuery(), links: SourceLinker | None = None) -> OpsResult:
    """The `/api/runs/{id}/ops` object: one view's rows in `sort` order (default_op_sort's rule when None);
    start_ns/end_ns (relative) keep the ops that start in that range; `rank` keeps those ranks' slices;
    with `links`, Python frame rows get their `source_url`."""
    store, rec, ranks = run.store, run.record, query.ranks
    device_total = run_device_total_ns(rec) if ranks is None else rank_device_total_ns(store, rec.id, ranks)
    check_op_view(query.view)
    sort = query.sort or default_op_sort(device_total, query.view)
    whole = query.start_ns is None and query.end_ns is None
    start = run.origin_ns + (query.start_ns or 0)
    end = run.origin_ns + (query.end_ns if query.end_ns is not None else run.span_ns + 1)
    # memory columns (explorer/views/op_memory.py): rows by name, shape or module, some ranks, a time range
    memory = run_op_memory(store, rec.id, query.by_shape, query.by_module, ranks,
                           None if whole else (start - run.origin_ns, end - run.origin_ns), query.memory_device)
    mem_sort = memory is not None and is_memory_sort(sort)
    if whole:
        rows = load_ops(store, rec.id, sort=default_op_sort(device_total, query.view) if mem_sort else sort,
                        limit=None if mem_sort else query.limit, by_shape=query.by_shape, name_filter=query.q,
                        view=query.view, by_module=query.by_module, ranks=ranks)
    else:
        rows = load_ops_in_range(store, rec.id, start, end,
                                 sort=default_op_sort(device_total, query.view) if mem_sort else sort,
                                 limit=None if mem_sort else query.limit, by_shape=query.by_shape,
                                 name_filter=query.q, view=query.view, by_module=query.by_module, ranks=ranks)
    for row in rows if links is not None else []:
        url = links.url(parse_frame(row["name"])) if links is not None and row["kind"] == "python" else None
        if url:
            row["source_url"] = url
    rates = add_op_work(store, rec, rows, query.by_shape, device_total, ranks)  # achieved rates (views.rates)
    result: OpsResult = {"rows": rows, "device_total_ns": device_total,
                         "attributed_ns": attributed_device_ns(store, rec, ranks), "view": query.view, "sort": sort,
                         "has_modules": has_module_frames(store, rec.id), "rates": rates}
    if memory is not None:
        add_op_memory(rows, memory[1])
        result["memory"] = memory[0]
        if mem_sort:
            result["rows"] = sort_memory_rows(rows, sort, query.limit)
    return result


def build_ops_page(run: Run, query: OpsQuery = OpsQuery(), links: SourceLinker | None = None) -> OpsPage:
    """Grouping by module is offered (and honoured) only for runs that have nn.Module frames."""
    has_modules = has_module_frames(run.store, run.id)
    query = replace(query, by_module=query.by_module and has_modules)
    data = compute_run_ops(run, query, links)
    ops_page = OpsPage(run_json(run.record), data["rows"], data["device_total_ns"], data["sort"], query.q,
                       query.by_shape, query.limit,
                       make_top_ops_figure(data["rows"], ops_chart_metric(data["sort"], data["device_total_ns"],
                                                                          data["view"])),
                       data["view"], data["attributed_ns"], query.by_module, data["has_modules"], rank=query.rank,
                       ranks=run.rank_ids(), page=max(1, query.page), start_ns=query.start_ns, end_ns=query.end_ns,
                       memory=data.get("memory"), rates=data.get("rates"), memory_device=query.memory_device)
    ops_page.twin = f"/api/runs/{run.id}/ops?{ops_page.query()}"
    return ops_page


def ops_chart_metric(sort: str, device_total_ns: int, view: str = DEFAULT_OP_VIEW) -> str:
    """The ops page's chart follows the table: its sort column when that is a time, else the view's default."""
    key = sort.lstrip("-+")
    return key if key in OP_TIME_COLUMNS else default_op_sort(device_total_ns, view).lstrip("-")
