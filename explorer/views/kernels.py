"""The kernels page (`/runs/{id}/kernels`, twin `/api/runs/{id}/kernels`): device executions by name and category."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from explorer.analysis.kernels import (
    CATEGORY_RULES,
    DEFAULT_KERNEL_SORT,
    KernelTable,
    sort_descending,
    sort_kernel_rows,
)
from explorer.analysis.rank_slices import parse_ranks, rank_key
from explorer.errors import BadRequest
from explorer.model.shapes import (
    KernelCategory,
    KernelRow,
    KernelsResult,
    RatesBasis,
    RunJson,
)
from explorer.runs.run import Run
from explorer.views.charts import (
    make_kernel_category_figure,
    make_top_kernels_figure,
)
from explorer.views.links import run_json
from explorer.views.rates import with_kernel_work
from explorer.views.tables import SortLinks

KERNEL_CATEGORIES = tuple(dict.fromkeys(rule.category for rule in CATEGORY_RULES))


@dataclass(frozen=True)
class KernelsQuery:
    """The kernel table's query, one for the page and its JSON twin (api/deps.py KernelsQueryDep)."""

    sort: str = DEFAULT_KERNEL_SORT
    q: str = ""  # name substring
    category: str = ""
    limit: int | None = None
    rank: str = ""  # `rank=0,3` as given ("" every rank)
    page: int = 1

    @property
    def ranks(self) -> tuple[int, ...] | None:
        return parse_ranks(self.rank)


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
    rates: RatesBasis | None = None  # what the rows' `work` rates compare with (explorer.views.rates)

    def sort_descending(self, sort: str) -> bool:
        return sort_descending(sort)

    def query(self, **override: Any) -> str:
        params: dict[str, Any] = {"sort": self.sort, "q": self.q, "category": self.category, "limit": self.limit,
                                  "page": self.page if self.page > 1 else None, "rank": self.rank}
        params.update(override)
        return urlencode({k: v for k, v in params.items() if v not in ("", None) or k == "sort"})


def kernels_json(kernels: KernelTable, sort: str = DEFAULT_KERNEL_SORT, q: str = "", category: str = "",
                 limit: int | None = None) -> KernelsResult:
    """The `/api/runs/{id}/kernels` object; the kernels page holds the same rows."""
    if category and category not in KERNEL_CATEGORIES:
        raise BadRequest(f"no kernel category {category!r}; categories: {', '.join(KERNEL_CATEGORIES)}")
    rows = sort_kernel_rows(kernels.table, sort, limit, q, category)
    for row in rows:  # the work of the ops that launched them (explorer.views.rates)
        row["work"] = kernels.work.get(row["name"])
    out: KernelsResult = {"rows": rows, "device_total_ns": kernels.device_total_ns, "categories": kernels.categories}
    if kernels.rates is not None:
        out["rates"] = kernels.rates
    return out


def kernel_table(run: Run, ranks: tuple[int, ...] | None = None) -> KernelTable:
    """The run's kernel table (of some of its ranks) with each kernel's achieved rates, computed once."""
    def build() -> KernelTable:
        tracks = None if ranks is None else run.rank_subset(ranks).tracks.column("track_id").combine_chunks()
        return with_kernel_work(run.kernels(ranks), run.store, run.record, tracks)

    return run.cached("kernels_work" + rank_key(ranks), build)


def compute_run_kernels(run: Run, query: KernelsQuery = KernelsQuery()) -> KernelsResult:
    """The `/api/runs/{id}/kernels` object of the run (of the `rank=` filter's ranks)."""
    return kernels_json(kernel_table(run, query.ranks), query.sort, query.q, query.category, query.limit)


def build_kernels_page(run: Run, query: KernelsQuery = KernelsQuery()) -> KernelsPage:
    data = compute_run_kernels(run, query)
    figures = {"top": make_top_kernels_figure(data["rows"]), "categories": make_kernel_category_figure(data["categories"])}
    kernels_page = KernelsPage(run_json(run.record), data["rows"], data["device_total_ns"], data["categories"],
                               query.sort, query.q, query.category, query.limit, figures, page=max(1, query.page),
                               rank=query.rank, ranks=run.rank_ids(), rates=data.get("rates"))
    kernels_page.twin = f"/api/runs/{run.id}/kernels?{kernels_page.query()}"
    return kernels_page
