"""The kernel view's data: a stored run's kernel table, its JSON object (`/api/runs/{id}/kernels`) and
the page context type. The page is built in explorer.pages (build_kernels_page), which imports this;
nothing here renders or formats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pyarrow.parquet as pq

from explorer.analysis.kernels import (
    CATEGORY_RULES,
    KernelTable,
    compute_kernel_table,
    sort_descending,
    sort_kernel_rows,
)
from explorer.errors import BadRequest
from explorer.model.shapes import KernelCategory, KernelRow, KernelsResult, RunJson
from explorer.store.runs import RunStore

KERNEL_CATEGORIES = tuple(dict.fromkeys(rule.category for rule in CATEGORY_RULES))


@dataclass
class KernelsPage:
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

    @property
    def descending(self) -> bool:
        return sort_descending(self.sort)

    def sort_link(self, column: str) -> str:
        """Query string sorting by `column`: numbers first descending, text ascending; the sorted
        column flips."""
        desc = not self.descending if self.sort.lstrip("-+") == column else sort_descending(column)
        return "?" + self.query(sort=("-" if desc else "+") + column)

    def query(self, **override: Any) -> str:
        params: dict[str, Any] = {"sort": self.sort, "q": self.q, "category": self.category, "limit": self.limit}
        params.update(override)
        return urlencode({k: v for k, v in params.items() if v not in ("", None) or k == "sort"})


def compute_run_kernels(store: RunStore, run_id: str) -> KernelTable:
    """The kernel table of a stored run: the cached slice columns plus the args of its device
    executions, read from Parquet (only those rows' args)."""
    store.require_ready(run_id)
    args = pq.read_table(store.table_path(run_id, "slices"), columns=["args"],
                         filters=[("device_time", "=", True)]).column("args")
    return compute_kernel_table(store.table(run_id, "slices"), args)


def kernels_json(kernels: KernelTable, sort: str = "-total_ns", q: str = "", category: str = "",
                 limit: int | None = None) -> KernelsResult:
    """The `/api/runs/{id}/kernels` object; the kernels page holds the same rows."""
    if category and category not in KERNEL_CATEGORIES:
        raise BadRequest(f"no kernel category {category!r}; categories: {', '.join(KERNEL_CATEGORIES)}")
    return {"rows": sort_kernel_rows(kernels.table, sort, limit, q, category),
            "device_total_ns": kernels.device_total_ns, "categories": kernels.categories}
