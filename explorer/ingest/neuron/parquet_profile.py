"""Parser for Neuron Explorer's Parquet export (`neuron-explorer view --output-format parquet`): each file's
table told by its stem or its columns, system tables made slices and counters here, device-profile tables
handed to neuron_device.py. A floating time column is read through each value's shortest decimal text."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.neuron.device import stash_profile_list, stash_table
from explorer.ingest.neuron.rules import NeuronSink, as_ns
from explorer.model.neuron_schema import (
    SYSTEM_TABLES,
    has_required_columns,
    recognize_columns,
    table_of_stem,
)

log = logging.getLogger(__name__)

TIME_COLUMNS = ("timestamp_ns", "timestamp", "ts", "start_ts", "time_ns", "time")
EVENT_COLUMNS = ("id", "name", "start_ts", "end_ts", "duration_ns", "trace_event_source", "instance_id",
                 "process_id", "thread_id", "nc_idx", "pcore_idx", "worker_gid", "flow_id",
                 "framework_stream_id", "extra_attributes_json")
EVENT_TIME_COLUMNS = ("start_ts", "end_ts", "duration_ns")


def table_kind(columns: list[str], filename: str = "") -> tuple[str, int]:
    """(table, split part) of a file: by its stem when its columns fit that table, else by its columns."""
    base = PurePosixPath(filename).name
    kind, part = table_of_stem(base.removesuffix(".parquet")) if base.endswith(".parquet") else ("", 0)
    if kind and has_required_columns(kind, columns):
        return kind, part
    recognized = recognize_columns(columns)
    return (recognized.table, 0) if recognized else ("", 0)


def parse_neuron_parquet(data: bytes, filename: str, builder: TraceBuilder,
                         instance: str = "") -> dict[str, Any]:
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        raise BadTrace(filename, f"unreadable Parquet file ({exc})") from None
    kind, part = table_kind(table.column_names, filename)
    if kind == "DeviceProfileList":
        return {"format": "neuron_parquet", "table": kind, "rows": stash_profile_list(builder, filename, table)}
    if kind and kind not in SYSTEM_TABLES:
        stash_table(builder, filename, kind, part, table)
        return {"format": "neuron_parquet", "table": kind, "part": part, "rows": table.num_rows}
    reader = READERS.get(kind)
    if reader is None:
        raise BadTrace(filename, "a Parquet table that is not a Neuron system-profile table nor a device-profile "
                       "table (columns: " + ", ".join(table.column_names[:12]) + "); kept as an artifact")
    sink = NeuronSink(builder, filename, instance)
    stored = reader(table, sink)
    sink.report()
    if stored == 0 and not sink.skipped_framework:
        raise BadTrace(filename, f"the {kind} table holds no usable rows")
    return {"format": "neuron_parquet", "table": kind, "rows": table.num_rows}


def _int_column(table: pa.Table, name: str) -> list[Any]:
    """A column as Python values, timestamps as integer ns; Nones where missing."""
    if name not in table.column_names:
        return [None] * table.num_rows
    col = table.column(name)
    if pa.types.is_timestamp(col.type):
        col = pc.cast(pc.cast(col, pa.timestamp("ns")), pa.int64())
    values: list[Any] = col.to_pylist()
    return values


def _time_column(table: pa.Table, name: str, sink: NeuronSink) -> list[Any]:
    """A time column as int (or Decimal) values for as_ns. A floating column is not what Neuron writes:
    its values are taken as their shortest decimal text (what the writer printed), with a warning."""
    values = _int_column(table, name)
    if name in table.column_names and pa.types.is_floating(table.column(name).type):
        sink.b.warn("float_time_column", f"time column {name!r} is floating-point: its values were read as "
                    "their shortest decimal form and may be off by a few ns", 1, sink.filename)
        values = [None if v is None else Decimal(repr(v)) for v in values]
    return values


def _read_events(table: pa.Table, sink: NeuronSink) -> int:
    cols = {name: _time_column(table, name, sink) if name in EVENT_TIME_COLUMNS else _int_column(table, name)
            for name in EVENT_COLUMNS if name in table.column_names}
    n = table.num_rows
    start = cols.get("start_ts", [None] * n)
    end = cols.get("end_ts", [None] * n)
    dur = cols.get("duration_ns", [None] * n)
    for i in range(n):
        fields = {k: v[i] for k, v in cols.items() if v[i] is not None and k != "extra_attributes_json"}
        extra = cols.get("extra_attributes_json", [None] * n)[i]
        if isinstance(extra, str) and extra:
            fields.update(_extra(extra))
        ts_ns = as_ns(start[i])
        dur_ns = as_ns(dur[i])
        end_ns = as_ns(end[i])
        if dur_ns is None and ts_ns is not None and end_ns is not None:
            dur_ns = max(0, end_ns - ts_ns)
        sink.add(fields, str(fields.get("name", "")), ts_ns, dur_ns, instance=str(fields.get("instance_id") or ""),
                 own_id=str(fields.get("id", "")))
    return sink.stored + sink.skipped_framework


def _extra(text: str) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return {"extra_attributes_json": text}
    return value if isinstance(value, dict) else {"extra_attributes": value}


def _series_rows(table: pa.Table, sink: NeuronSink) -> tuple[list[int | None], list[dict[str, Any]]]:
    time_col = next((c for c in TIME_COLUMNS if c in table.column_names), "")
    if not time_col:
        raise BadTrace(sink.filename, "a counter table without a time column ("
                       + ", ".join(TIME_COLUMNS) + ")")
    times = [as_ns(v) for v in _time_column(table, time_col, sink)]
    sink.bad_time += sum(t is None for t in times)
    return times, table.drop_columns([time_col]).to_pylist()


def _counters(table: pa.Table, sink: NeuronSink, series_of: Callable[[dict[str, Any]], list[tuple[str, Any]]]) -> int:
    times, rows = _series_rows(table, sink)
    stored = 0
    for ts_ns, row in zip(times, rows, strict=True):
        if ts_ns is None:
            continue
        src = sink.src(str(row.get("instance_id") or ""))
        pid = sink.pid(row.get("process_id"))
        for series, value in series_of(row):
            if isinstance(value, int | float) and not isinstance(value, bool):
                sink.b.add_counter(src, pid, series, ts_ns, float(value))
                stored += 1
    return stored


def _read_hbm(table: pa.Table, sink: NeuronSink) -> int:
    """The published form: `total_bytes` and one `<type>_bytes` column per usage type -> a total series
    plus one per type that is non-zero somewhere; older exports (one row per category) as before."""
    if "total_bytes" not in table.column_names:
        return _counters(table, sink, _hbm_series)
    types = [c for c in table.column_names if c.endswith("_bytes") and c != "total_bytes"
             and pa.types.is_integer(table.column(c).type) and pc.max(pc.abs(table.column(c))).as_py()]

    def series(row: dict[str, Any]) -> list[tuple[str, Any]]:
        where = f"HBM {row.get('hbm_idx', 0)}"
        if row.get("device_idx") is not None:
            where = f"device {row['device_idx']} {where}"
        return [(f"{where} total [bytes]", row.get("total_bytes"))] + [
            (f"{where} {c.removesuffix('_bytes')} [bytes]", row.get(c)) for c in types]
    return _counters(table, sink, series)


def _hbm_series(row: dict[str, Any]) -> list[tuple[str, Any]]:
    category = row.get("hbm_category") or row.get("category") or "total"
    where = next((f" HBM {row[k]}" for k in ("hbm_idx", "device_idx", "nc_idx") if row.get(k) is not None), " HBM")
    value = next((row[k] for k in ("hbm_usage_bytes", "hbm_bytes", "usage_bytes", "bytes") if k in row), None)
    return [(f"{where.strip()} {category} [bytes]", value)]


def _cpu_series(row: dict[str, Any]) -> list[tuple[str, Any]]:
    value = next((row[k] for k in ("util_percent", "cpu_util", "cpu_utilization", "util") if k in row), None)
    return [(f"CPU {row.get('cpu_id', 'all')} utilization [%]", value)]


def _host_mem_series(row: dict[str, Any]) -> list[tuple[str, Any]]:
    usage = next((row[k] for k in ("used_bytes", "host_mem_bytes", "host_memory_bytes", "usage") if k in row), None)
    percent = next((row[k] for k in ("used_percent", "percent_usage") if k in row), None)
    return [("host memory [bytes]", usage), ("host memory [%]", percent)]


def _read_warnings(table: pa.Table, sink: NeuronSink) -> int:
    column = "warning" if "warning" in table.column_names else "message"
    texts = [str(t) for t in table.column(column).to_pylist() if t]
    for text in texts:
        sink.b.warn("neuron_warning", f"Neuron profiler: {text}", 1, sink.filename)
    return len(texts) or 1  # an empty Warning table is still a table read correctly


READERS: dict[str, Callable[[pa.Table, NeuronSink], int]] = {
    "SystemProfileEvents": _read_events,
    "SystemProfileHbmUsage": _read_hbm,
    "CpuUsage": lambda t, s: _counters(t, s, _cpu_series),
    "HostMemUsage": lambda t, s: _counters(t, s, _host_mem_series),
    "Warning": _read_warnings,
    "SystemProfileMetadata": lambda t, s: 1,  # capture bounds and HBM capacity: nothing to draw
}
