"""Read-side queries over a stored run that several front ends share (CLI, API, pages): the op table
in its views (operators, python frames, all of key_averages()), with the one default sort rule per view.
The operators view never drops device time: its rows' self device time sums to the run's attributed time."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from explorer.analysis.op_stats import (
    MODULE_FRAME_PREFIX,
    RUNTIME_KIND,
    compute_op_stats,
    compute_op_stats_by_module,
    device_time_summary,
)
from explorer.analysis.rank_slices import check_ranks, rank_key, restrict_to_ranks
from explorer.errors import BadRequest
from explorer.model.ranks import run_ranks
from explorer.model.shapes import OpRow
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import CACHED_SLICE_COLUMNS, RunStore

OP_COLUMNS = ("name", "input_shapes", "calls", "cpu_total_ns", "self_cpu_ns", "cpu_avg_ns", "device_total_ns",
              "self_device_ns", "device_pct")
OP_TIME_COLUMNS = ("cpu_total_ns", "self_cpu_ns", "cpu_avg_ns", "device_total_ns", "self_device_ns")
# view -> the row kind it keeps (None: every row, exactly key_averages()); the views in LAUNCH_SITE_VIEWS also
# keep the rows of other kinds that have self device time: the Python frames and runtime calls that launched
# device work with no op around them (their kind says which), so that no device time leaves the view
OP_VIEWS: dict[str, str | None] = {"operators": "operator", "python": "python", "all": None}
LAUNCH_SITE_VIEWS = frozenset({"operators"})
DEFAULT_OP_VIEW = "operators"
# the kinds of row the operators view shows as launch sites (the pages mark them)
LAUNCH_SITE_KINDS = ("python", RUNTIME_KIND)


def run_device_total_ns(rec: RunRecord) -> int:
    """All device execution time of a run (0 for a host-only profile)."""
    return rec.summary.device_total_ns


def rank_device_total_ns(store: RunStore, run_id: str, ranks: tuple[int, ...]) -> int:
    """All device execution time of some ranks of a run (the rank-filtered op table's device_pct base)."""
    def build() -> int:
        slices = load_op_slices(store, run_id, ranks)
        dev = slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
        return int(slices.column("dur_ns").to_numpy()[dev].sum())

    return int(store.derived.get(run_id, "device_total" + rank_key(ranks), build))


def attributed_device_ns(store: RunStore, rec: RunRecord, ranks: tuple[int, ...] | None = None) -> int:
    """Device time some launch in the trace accounts for (an op, a frame, a runtime call): what the operators
    view's rows sum to. The whole run's is its summary's (the DEVICE TIME card); some ranks' is computed."""
    if ranks is None:
        return rec.summary.device.attributed_ns

    def build() -> int:
        return device_time_summary(*load_op_inputs(store, rec.id, ranks))["attributed_ns"]

    return int(store.derived.get(rec.id, "device_attributed" + rank_key(ranks), build))


# Rows equal in the sort column order by these, ascending (the browser's sort reads them from the page)
OP_TIE_BREAK = ("name", "module", "input_shapes")


def default_op_sort(device_total_ns: int, view: str = DEFAULT_OP_VIEW) -> str:
    """The op table's default order: where device time goes when there is any, else where CPU time goes.
    The python frames view orders by CPU total: frames' self device time is mostly zero (it rolls up to
    the ops they call) and their self CPU is the interpreter's share, while the time under a frame is what
    tells one function from another."""
    if view == "python":
        return "-cpu_total_ns"
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
             by_module: bool = False, ranks: tuple[int, ...] | None = None) -> list[OpRow]:
    """Op table rows of one view. `sort` is a column, `-column` for descending (numbers sort descending
    by default); None is default_op_sort's rule. `ranks`: only those ranks' slices (rank_op_table)."""
    rec = store.require_ready(run_id)
    check_op_view(view)
    table = op_table(store, run_id, by_shape=by_shape, by_module=by_module, ranks=ranks)
    return sort_op_rows(select_op_view(table, view), sort or default_op_sort(run_device_total_ns(rec), view), limit,
                        name_filter)


def select_op_view(table: pa.Table, view: str) -> pa.Table:
    """The rows of one view (OP_VIEWS; LAUNCH_SITE_VIEWS keep launch sites too)."""
    kind = OP_VIEWS[check_op_view(view)]
    if kind is None:
        return table
    keep = pc.equal(table.column("kind"), kind)
    if view in LAUNCH_SITE_VIEWS:
        keep = pc.or_(keep, pc.greater(table.column("self_device_ns"), 0))
    return table.filter(keep)


def op_table(store: RunStore, run_id: str, by_shape: bool = False, by_module: bool = False,
             ranks: tuple[int, ...] | None = None) -> pa.Table:
    """The whole op table (every view). Stored at ingest; computed on load (and kept) per module, per
    rank filter, and for runs stored before op tables had a `kind` column."""
    if ranks is not None:
        return _derived(store, run_id, ("module" if by_module else "ranks", by_shape), ranks)
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


def load_op_slices(store: RunStore, run_id: str, ranks: tuple[int, ...] | None = None) -> pa.Table:
    """The slice columns the op table is computed from (input shapes included), straight from Parquet;
    with `ranks`, only those ranks' slices, renumbered as a run of their own (explorer.analysis.rank_slices)."""
    return load_op_inputs(store, run_id, ranks)[0]


def load_op_inputs(store: RunStore, run_id: str,
                   ranks: tuple[int, ...] | None = None) -> tuple[pa.Table, pa.Table]:
    """load_op_slices' slices and the flows between them (which runtime call launched what)."""
    slices = pq.read_table(store.table_path(run_id, "slices"), columns=[*CACHED_SLICE_COLUMNS, "shapes"])
    flows = store.table(run_id, "flows")
    if ranks is None:
        return slices, flows
    tracks = store.table(run_id, "tracks")
    check_ranks(ranks, run_ranks(tracks))
    sub = restrict_to_ranks(slices, tracks, flows, ranks)
    return sub.slices, sub.flows


def _derived(store: RunStore, run_id: str, what: tuple[str, bool], ranks: tuple[int, ...] | None = None) -> pa.Table:
    """An op table computed on load, kept in the store's memo (size: Settings.op_table_cache)."""
    kind, by_shape = what

    def build() -> pa.Table:
        slices, flows = load_op_inputs(store, run_id, ranks)
        if kind == "module":
            return compute_op_stats_by_module(slices, by_shape=by_shape, flows=flows)
        return compute_op_stats(slices, flows)[1 if by_shape else 0]

    key = f"op_table:{kind}:{int(by_shape)}" + rank_key(ranks)
    return store.derived.get(run_id, key, build)


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
