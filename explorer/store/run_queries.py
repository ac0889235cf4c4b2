"""Read-side queries the server needs beyond explorer.store.queries: one slice column read on demand
(args are not cached) and the op table restricted to a time range, recomputed from the slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from explorer.analysis.ops import compute_op_stats
from explorer.store.queries import sort_op_rows
from explorer.store.runs import CACHED_SLICE_COLUMNS, RunStore


def load_slice_column(store: RunStore, run_id: str, column: str) -> pa.ChunkedArray:
    """One column of the slices table, by slice_id, straight from Parquet."""
    store.require_ready(run_id)
    return pq.read_table(store.table_path(run_id, "slices"), columns=[column]).column(column)


def load_ops_in_range(store: RunStore, run_id: str, start_ns: int, end_ns: int, sort: str = "device_total_ns",
                      limit: int | None = None, by_shape: bool = False, name_filter: str = "") -> list[dict[str, Any]]:
    """Op table over the ops that start in [start_ns, end_ns) (absolute ns). Ops outside the range stay
    in the tree (so self times and device roll-ups are right) but are not counted."""
    store.require_ready(run_id)
    slices = pq.read_table(store.table_path(run_id, "slices"), columns=[*CACHED_SLICE_COLUMNS, "shapes"])
    ts = slices.column("ts_ns").to_numpy()
    inside = (ts >= start_ns) & (ts < end_ns)
    if inside.all():
        table = store.table(run_id, "op_stats_by_shape" if by_shape else "op_stats")
    else:
        table = _restricted(slices, inside, by_shape)
    return sort_op_rows(table, sort, limit, name_filter)


def _restricted(slices: pa.Table, inside: np.ndarray, by_shape: bool) -> pa.Table:
    """compute_op_stats over the whole tree, counting only ops starting inside: ops outside become
    runtime-like nodes (kept in the tree, excluded from the table)."""
    is_op = slices.column("is_op").to_numpy(zero_copy_only=False).astype(bool)
    outside_op = is_op & ~inside
    lane = np.asarray(slices.column("lane").to_numpy(zero_copy_only=False), dtype=object)
    lane = np.where(outside_op, "runtime", lane)
    table = slices.set_column(slices.schema.get_field_index("is_op"), "is_op", pa.array(is_op & inside))
    table = table.set_column(table.schema.get_field_index("lane"), "lane", pa.array(lane, pa.string()))
    by_name, by_shape_table = compute_op_stats(table)
    return by_shape_table if by_shape else by_name
