"""Read-side queries over a stored run that several front ends share (CLI, API, pages)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from explorer.errors import BadRequest
from explorer.store.runs import RunStore

OP_COLUMNS = ("name", "input_shapes", "calls", "cpu_total_ns", "self_cpu_ns", "cpu_avg_ns", "device_total_ns",
              "self_device_ns", "device_pct")


def load_ops(store: RunStore, run_id: str, sort: str = "device_total_ns", limit: int | None = None,
             by_shape: bool = False, name_filter: str = "") -> list[dict[str, Any]]:
    """Op table rows. `sort` is a column, `-column` for descending (numbers sort descending by default)."""
    store.require_ready(run_id)
    table = store.table(run_id, "op_stats_by_shape" if by_shape else "op_stats")
    return sort_op_rows(table, sort, limit, name_filter)


def sort_op_rows(table: pa.Table, sort: str, limit: int | None = None, name_filter: str = "") -> list[dict[str, Any]]:
    """Filter (substring of the name, any case), sort and cut an op table into rows."""
    if name_filter:
        table = table.filter(pc.match_substring(table.column("name"), name_filter, ignore_case=True))
    key = sort.lstrip("-+")
    if key not in OP_COLUMNS:
        raise BadRequest(f"cannot sort by {sort!r}; columns: {', '.join(OP_COLUMNS)}")
    descending = sort.startswith("-") or (key != "name" and not sort.startswith("+"))
    table = table.sort_by([(key, "descending" if descending else "ascending"), ("name", "ascending")])
    if limit is not None:
        table = table.slice(0, max(0, limit))
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows
