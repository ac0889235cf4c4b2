"""Collectives matched across ranks (`/runs/{id}/collectives`, twin `/api/runs/{id}/collectives`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from explorer.analysis.collectives import (
    DEFAULT_SORT as COLLECTIVES_SORT,
)
from explorer.analysis.collectives import (
    TEXT_SORTS as COLLECTIVE_TEXT_SORTS,
)
from explorer.analysis.collectives import (
    collective_links,
    collectives_result,
)
from explorer.errors import BadRequest
from explorer.model.shapes import (
    CollectiveLinks,
    CollectiveRow,
    CollectivesResult,
    RunJson,
)
from explorer.runs.run import Run, RunCollectives
from explorer.views.links import run_json
from explorer.views.tables import SortLinks


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


def build_collectives_page(run: Run, sort: str = COLLECTIVES_SORT, limit: int | None = None) -> CollectivesPage:
    data = collectives_json(run.collectives(), sort, limit)
    page = CollectivesPage(run_json(run.record), data, sort, limit)
    page.twin = f"/api/runs/{run.id}/collectives?{page.query()}"
    return page


__all__ = ["COLLECTIVES_SORT", "CollectivesPage", "build_collectives_page", "collective_links_json", "collectives_json"]
