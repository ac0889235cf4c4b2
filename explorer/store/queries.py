"""Read-side queries over a stored run that several front ends share (CLI, API, pages): the op table
in its views (operators, python frames, all of key_averages()), with the one default sort rule."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from explorer.errors import BadRequest
from explorer.model.op_stats import MODULE_FRAME_PREFIX, compute_op_stats, compute_op_stats_by_module
from explorer.model.shapes import OpRow
from explorer.store.catalog import RunRecord
from explorer.store.runs import CACHED_SLICE_COLUMNS, RunStore

OP_COLUMNS = ("name", "input_shapes", "calls", "cpu_total_ns", "self_cpu_ns", "cpu_avg_ns", "device_total_ns",
              "self_device_ns", "device_pct")
OP_TIME_COLUMNS = ("cpu_total_ns", "self_cpu_ns", "cpu_avg_ns", "device_total_ns", "self_device_ns")
# view -> the row kind it keeps (None: every row, exactly key_averages())
OP_VIEWS: dict[str, str | None] = {"operators": "operator", "python": "python", "all": None}
DEFAULT_OP_VIEW = "operators"


def run_device_total_ns(rec: RunRecord) -> int:
    """All device execution time of a run (0 for a host-only profile)."""
    return rec.summary.device_total_ns


# Rows equal in the sort column order by these, ascending (the browser's sort reads them from the page)
OP_TIE_BREAK = ("name", "module", "input_shapes")


def default_op_sort(device_total_ns: int) -> str:
    """The op table's default order: where device time goes when there is any, else where CPU time goes."""
    return "-self_device_ns" if device_total_ns > 0 else "-self_cpu_ns"


def op_sort_descending(sort: str) -> bool:
    """The op table's one sort-direction rule: `-col` descending, `+col` ascending, a bare column
    descending unless it is `name`."""
    return sort.startswith("-") or (sort.lstrip("-+") != "name" and not sort.startswith("+"))


def check_op_view(view: str) -> str:
    if view not in OP_VIEWS:
        raise BadRequest(f"unknown op view {view!r}; views: {', '.join(OP_VIEWS)}")
    return view


def load_ops(store: RunStore, run_id: str, sort: str | None = None, limit: int | None = None,
             by_shape: bool = False, name_filter: str = "", view: str = DEFAULT_OP_VIEW,
             by_module: bool = False) -> list[OpRow]:
    """Op table rows of one view. `sort` is a column, `-column` for descending (numbers sort descending
    by default); None is default_op_sort's rule."""
    rec = store.require_ready(run_id)
    check_op_view(view)
    table = op_table(store, run_id, by_shape=by_shape, by_module=by_module)
    return sort_op_rows(select_op_view(table, view), sort or default_op_sort(run_device_total_ns(rec)), limit,
                        name_filter)


def select_op_view(table: pa.Table, view: str) -> pa.Table:
    kind = OP_VIEWS[check_op_view(view)]
    return table if kind is None else table.filter(pc.equal(table.column("kind"), kind))


def op_table(store: RunStore, run_id: str, by_shape: bool = False, by_module: bool = False) -> pa.Table:
    """The whole op table (every view). Stored at ingest; computed on load (and kept) per module, and
    for runs stored before op tables had a `kind` column."""
    if not by_module:
        stored = store.table(run_id, "op_stats_by_shape" if by_shape else "op_stats")
        if "kind" in stored.column_names:
            return stored
    return _derived(store, run_id, ("module" if by_module else "legacy", by_shape))


def has_module_frames(store: RunStore, run_id: str) -> bool:
    """Whether the run was profiled with_modules (python frames named "nn.Module: ...")."""
    table = op_table(store, run_id)
    python = table.filter(pc.equal(table.column("kind"), "python"))
    return bool(pc.any(pc.starts_with(python.column("name"), MODULE_FRAME_PREFIX)).as_py() or False)


def load_op_slices(store: RunStore, run_id: str) -> pa.Table:
    """The slice columns the op table is computed from (input shapes included), straight from Parquet."""
    return pq.read_table(store.table_path(run_id, "slices"), columns=[*CACHED_SLICE_COLUMNS, "shapes"])


def _derived(store: RunStore, run_id: str, what: tuple[str, bool]) -> pa.Table:
    """An op table computed on load, kept in the store's memo (size: Settings.op_table_cache)."""
    kind, by_shape = what

    def build() -> pa.Table:
        slices = load_op_slices(store, run_id)
        if kind == "module":
            return compute_op_stats_by_module(slices, by_shape=by_shape)
        return compute_op_stats(slices)[1 if by_shape else 0]

    return store.derived.get(run_id, f"op_table:{kind}:{int(by_shape)}", build)


def sort_op_rows(table: pa.Table, sort: str, limit: int | None = None, name_filter: str = "") -> list[OpRow]:
    """Filter (substring of the name, any case), sort and cut an op table into rows."""
    if name_filter:
        table = table.filter(pc.match_substring(table.column("name"), name_filter, ignore_case=True))
    key = sort.lstrip("-+")
    columns = (*OP_COLUMNS, "module") if "module" in table.column_names else OP_COLUMNS
    if key not in columns:
        raise BadRequest(f"cannot sort by {sort!r}; columns: {', '.join(columns)}")
    ties = [(c, "ascending") for c in OP_TIE_BREAK if c in table.column_names and c != key]
    table = table.sort_by([(key, "descending" if op_sort_descending(sort) else "ascending"), *ties])
    if limit is not None:
        table = table.slice(0, max(0, limit))
    rows: list[OpRow] = table.to_pylist()
    return rows
