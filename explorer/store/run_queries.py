"""Read-side queries the server needs beyond explorer.store.queries: one slice column read on demand
(args are not cached) and the op table restricted to a time range, recomputed from the slices."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from explorer.analysis.op_stats import compute_op_stats, compute_op_stats_by_module
from explorer.model.lanes import Lane
from explorer.model.shapes import OpRow
from explorer.store.queries import (
    DEFAULT_OP_VIEW,
    check_op_view,
    default_op_sort,
    load_op_inputs,
    op_table,
    run_device_total_ns,
    select_op_view,
    sort_op_rows,
)
from explorer.store.runs import RunStore


def load_slice_column(store: RunStore, run_id: str, column: str) -> pa.ChunkedArray:
    """One column of the slices table, by slice_id, straight from Parquet."""
    store.require_ready(run_id)
    return pq.read_table(store.table_path(run_id, "slices"), columns=[column]).column(column)


def load_ops_in_range(store: RunStore, run_id: str, start_ns: int, end_ns: int, sort: str | None = None,
                      limit: int | None = None, by_shape: bool = False, name_filter: str = "",
                      view: str = DEFAULT_OP_VIEW, by_module: bool = False,
                      ranks: tuple[int, ...] | None = None) -> list[OpRow]:
    """Op table (one view, as load_ops) over the ops that start in [start_ns, end_ns) (absolute ns). Ops
    outside the range stay in the tree (so self times and device roll-ups are right) but are not counted."""
    rec = store.require_ready(run_id)
    check_op_view(view)
    slices, flows = load_op_inputs(store, run_id, ranks)
    ts = slices.column("ts_ns").to_numpy()
    inside = (ts >= start_ns) & (ts < end_ns)
    if inside.all():
        table = op_table(store, run_id, by_shape=by_shape, by_module=by_module, ranks=ranks)
    else:
        table = _restricted(slices, inside, by_shape, by_module, launched_inside(flows, inside))
    return sort_op_rows(select_op_view(table, view), sort or default_op_sort(run_device_total_ns(rec), view), limit,
                        name_filter)


def launched_inside(flows: pa.Table, inside: np.ndarray) -> pa.Table:
    """The flows from slices that start inside a range (a runtime call launching outside any op is a row of
    the range's table when it starts in the range, as an op is)."""
    if flows.num_rows == 0:
        return flows
    frm = flows.column("from_slice").to_numpy()
    ok = (frm >= 0) & (frm < len(inside))
    ok[ok] = inside[frm[ok]]
    return flows.filter(pa.array(ok))


def _restricted(slices: pa.Table, inside: np.ndarray, by_shape: bool, by_module: bool,
                flows: pa.Table | None = None) -> pa.Table:
    """compute_op_stats over the whole tree, counting only ops starting inside: ops outside become
    runtime-like nodes (kept in the tree, excluded from the table)."""
    is_op = slices.column("is_op").to_numpy(zero_copy_only=False).astype(bool)
    outside_op = is_op & ~inside
    lane = np.asarray(slices.column("lane").to_numpy(zero_copy_only=False), dtype=object)
    lane = np.where(outside_op, Lane.RUNTIME.value, lane)
    table = slices.set_column(slices.schema.get_field_index("is_op"), "is_op", pa.array(is_op & inside))
    table = table.set_column(table.schema.get_field_index("lane"), "lane", pa.array(lane, pa.string()))
    if by_module:
        return compute_op_stats_by_module(table, by_shape=by_shape, flows=flows)
    by_name, by_shape_table = compute_op_stats(table, flows)
    return by_shape_table if by_shape else by_name
