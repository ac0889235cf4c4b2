"""Table pages' shared parts: the sort and page links of a paged table, and its page size."""

from __future__ import annotations

from typing import Any

# rows per page of the op and kernel tables (the browser sorts, filters and pages the rest); 100 keeps a
# sort's redraw within a frame or two on the dev box, 200 did not (bench/ui.py)
TABLE_PAGE_ROWS = 100


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
