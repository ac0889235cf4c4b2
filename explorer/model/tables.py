"""Arrow schemas of a run's columnar tables and the in-memory bundle an ingest produces.

Times are integer nanoseconds (absolute where the input allows). No computation lives here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa

from explorer.model.device import DeviceProfile

TRACKS = pa.schema(
    [
        ("track_id", pa.int32()),
        ("lane", pa.string()),
        ("kind", pa.string()),  # slice | counter | instant
        ("instance", pa.string()),
        ("process", pa.string()),
        ("thread", pa.string()),
        ("label", pa.string()),
        ("device", pa.string()),  # device / NeuronCore / stream group, "" for host tracks
        ("sort_key", pa.int64()),
        ("max_depth", pa.int32()),
        ("count", pa.int64()),
        ("rank", pa.int32()),  # -1: unknown (explorer.ingest.ranks); older runs lack it (explorer.model.ranks)
        ("host", pa.string()),  # "" unknown
    ]
)

SLICES = pa.schema(
    [
        ("slice_id", pa.int64()),
        ("track_id", pa.int32()),
        ("ts_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("depth", pa.int32()),
        ("parent_id", pa.int64()),  # -1: none (parent on the same host thread, any lane)
        ("name", pa.string()),
        ("cat", pa.string()),
        ("lane", pa.string()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("op_id", pa.int64()),  # framework op this runtime call / device execution belongs to, -1 none
        ("is_op", pa.bool_()),
        ("device_time", pa.bool_()),
        ("shapes", pa.string()),  # Kineto "Input Dims" as JSON text, "" when absent
        ("args", pa.string()),  # JSON object text
    ]
)

FLOWS = pa.schema(
    [
        ("flow_id", pa.int64()),
        ("from_slice", pa.int64()),
        ("to_slice", pa.int64()),
        ("kind", pa.string()),
    ]
)

COUNTERS = pa.schema([("track_id", pa.int32()), ("ts_ns", pa.int64()), ("value", pa.float64())])

INSTANTS = pa.schema([("track_id", pa.int32()), ("ts_ns", pa.int64()), ("name", pa.string()), ("cat", pa.string()),
                      ("args", pa.string())])

OP_STATS = pa.schema(
    [
        ("name", pa.string()),
        ("input_shapes", pa.string()),  # "" in the per-name table
        ("kind", pa.string()),  # operator | python (all of the row's events are with_stack python frames)
        ("calls", pa.int64()),
        ("cpu_total_ns", pa.int64()),
        ("self_cpu_ns", pa.int64()),
        ("cpu_avg_ns", pa.int64()),
        ("device_total_ns", pa.int64()),
        ("self_device_ns", pa.int64()),
        ("device_pct", pa.float64()),
    ]
)

# not stored: computed on load, per (enclosing nn.Module path, name); path "" outside any module
OP_STATS_BY_MODULE = pa.schema([("module", pa.string()), *OP_STATS])

# CUDA allocator snapshots (explorer/ingest/alloc_snapshot.py): the trace of allocator actions per device, in order
ALLOC_TRACE = pa.schema([("device", pa.int32()), ("seq", pa.int64()), ("time_us", pa.int64()),  # -1: not recorded
                         ("action", pa.string()), ("addr", pa.int64()), ("size", pa.int64()), ("stream", pa.int64()),
                         ("device_free", pa.int64()),  # oom only, else -1
                         ("frame", pa.string()), ("frames", pa.string())])  # innermost user frame; JSON list
# ... and the blocks of the segments at the snapshot's moment, in address order within each segment
ALLOC_BLOCKS = pa.schema([("device", pa.int32()), ("segment", pa.int64()), ("segment_address", pa.int64()),
                          ("segment_size", pa.int64()), ("segment_type", pa.string()), ("stream", pa.int64()),
                          ("offset", pa.int64()), ("size", pa.int64()), ("requested_size", pa.int64()),
                          ("state", pa.string()), ("frame", pa.string())])
# export_memory_timeline's output (explorer/ingest/memory_timeline.py): signed byte changes per category
MEMORY_CATEGORIES = pa.schema([("ts_ns", pa.int64()),  # the profiler's clock (epoch ns); -1: held before the profile
                               ("action", pa.int8()),  # torch.profiler._memory_profiler.Action value; 0: coalesced form
                               ("bytes", pa.int64()), ("category", pa.string())])

TABLE_SCHEMAS: dict[str, pa.Schema] = {
    "tracks": TRACKS,
    "slices": SLICES,
    "flows": FLOWS,
    "counters": COUNTERS,
    "instants": INSTANTS,
    "op_stats": OP_STATS,
    "op_stats_by_shape": OP_STATS,
    "alloc_trace": ALLOC_TRACE,
    "alloc_blocks": ALLOC_BLOCKS,
    "memory_categories": MEMORY_CATEGORIES,
}


@dataclass
class Warning_:
    """One kind of oddity met during ingest, with how many times it occurred."""

    code: str
    message: str
    count: int = 1
    source: str = ""


class OrderedText(Protocol):
    """A text column of the slices table kept out of memory until the store writes it (big files' args)."""

    def batches(self, rows: int) -> Iterator[pa.Array]:
        """The column in slice order, `rows` values per batch (the last batch may be shorter)."""
        ...

    def take(self, ids: np.ndarray) -> pa.Array:
        """The values of a few slices, by slice id."""
        ...


class Tables(MutableMapping[str, pa.Table]):
    """A run's tables by name. A table may still be in the making on a thread (a Future): reading it waits
    for it, and raises what its making raised; the others are read at once. Iteration is in insertion order."""

    def __init__(self, tables: Mapping[str, pa.Table | Future[pa.Table]] | None = None) -> None:
        self._tables: dict[str, pa.Table | Future[pa.Table]] = dict(tables or {})

    def __getitem__(self, name: str) -> pa.Table:
        value = self._tables[name]
        if isinstance(value, Future):
            value = self._tables[name] = value.result()
        return value

    def __setitem__(self, name: str, value: pa.Table | Future[pa.Table]) -> None:
        self._tables[name] = value

    def __delitem__(self, name: str) -> None:
        del self._tables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def __repr__(self) -> str:
        return f"Tables({', '.join(self._tables)})"


@dataclass
class IngestedTrace:
    """Everything an ingest produced for one run, ready for the store. `slice_args`, when set, is the
    slices table's `args` column, absent from `tables["slices"]` (see OrderedText); `slice_args_of` reads
    args either way."""

    tables: Tables | dict[str, pa.Table]  # a Tables after construction
    warnings: list[Warning_] = field(default_factory=list)
    meta: dict[str, object] = field(default_factory=dict)  # span, devices, distributed info, formats
    device_profiles: list[DeviceProfile] = field(default_factory=list)  # Neuron device profiles (model/device.py)
    slice_args: OrderedText | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tables, Tables):
            self.tables = Tables(self.tables)

    def slice_args_of(self, ids: np.ndarray) -> pa.Array:
        """The args text of these slices (by slice id), wherever the column is held."""
        if self.slice_args is not None:
            return self.slice_args.take(ids)
        return self.tables["slices"].column("args").take(pa.array(ids)).combine_chunks()
