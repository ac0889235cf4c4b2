"""Column-level normalisation of Neuron device tables: time columns to exact int64 ns, engine keys to the
schema's lower case, the sort order of the big tables, and the published columns a table lacks (added on
load, as shared null arrays, so that a million-row table does not store or hold dozens of empty columns).
The export's table and field names are kept; which table a file is, and the profiles: neuron_device.py.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.ingest.times import arrow_ns_column
from explorer.model.device import SORT_KEYS
from explorer.model.neuron_schema import fields_of

Warn = Callable[[str, str, int], None]  # (code, message, count)

ENGINE_TABLES = ("Instruction", "ActiveTime", "OpcodeSummary")
# Instruction.timeline_track is optional: without it an instruction is drawn on its engine's row
ENGINE_TRACK = {"tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd", "sync": "Sync"}


def normalise_table(name: str, table: pa.Table, filename: str, warn: Warn) -> pa.Table:
    """One part of a device table as stored: times int64 ns, `engine` lower case, the export's columns."""
    for spec in fields_of(name):
        if spec.ns and spec.name in table.column_names:
            column, bad = ns_column(table.column(spec.name), spec.name, filename, warn)
            if bad:
                warn("bad_device_time", f"{filename}: {name}.{spec.name} values that are not a time in ns "
                     "(negative, out of range or not a number) were stored as null", bad)
            table = table.set_column(table.column_names.index(spec.name), spec.name, column)
    if name in ENGINE_TABLES and "engine" in table.column_names and pa.types.is_string(table.column("engine").type):
        table = table.set_column(table.column_names.index("engine"), "engine", pc.utf8_lower(table.column("engine")))
    if name == "Instruction":
        table = _fill_timeline_track(table)
    return table


def ns_column(column: pa.ChunkedArray, field: str, filename: str, warn: Warn) -> tuple[pa.Array, int]:
    """A time column as int64 ns (times.py) and the number of values that became null. A floating column
    is read through each value's shortest decimal text, with a warning."""
    col = column.combine_chunks()
    if pa.types.is_floating(col.type):
        warn("float_time_column", f"{filename}: time column {field!r} is floating-point: its values were "
             "read as their shortest decimal form and may be off by a few ns", 1)
        col = pa.array([None if v is None else str(Decimal(repr(v))) for v in col.to_pylist()], pa.string())
    out = arrow_ns_column(col)
    return out, out.null_count - column.null_count


def _fill_timeline_track(table: pa.Table) -> pa.Table:
    if "timeline_track" not in table.column_names:
        table = table.append_column("timeline_track", pa.nulls(table.num_rows, pa.string()))
    track = table.column("timeline_track")
    if track.null_count == 0 or "engine" not in table.column_names:
        return table
    engine = table.column("engine").to_pylist()
    filled = [t if t is not None else ENGINE_TRACK.get(str(e), str(e)) for t, e in zip(track.to_pylist(), engine,
                                                                                        strict=True)]
    return table.set_column(table.column_names.index("timeline_track"), "timeline_track",
                            pa.array(filled, pa.string()))


def sort_table(name: str, table: pa.Table) -> pa.Table:
    """The big tables by (track, start_ts), nulls last; others as they came."""
    keys = SORT_KEYS.get(name)
    if not keys or table.num_rows == 0 or not all(k in table.column_names for k in keys):
        return table
    order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys])  # nulls last by default
    if bool(np.all(np.diff(order.to_numpy().astype(np.int64)) > 0)):
        return table
    return table.take(order)
