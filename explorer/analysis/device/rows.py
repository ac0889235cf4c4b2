"""Row access shared by the device-profile analyses (Neuron): a profile's tables keyed by the export's own
table names, the time window and core filter, interval clipping and union, the exact pro-rata share of a
quantity inside a window, engine-name normalisation and the hardware peaks from `Metadata`. Column names
are PROFILE_SCHEMA.md's (schema 7.4); times are int64 ns in the profile's clock. No I/O, no formatting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.intervals import union_segments
from explorer.errors import BadRequest

I64 = np.int64
Tables = Mapping[str, pa.Table]
"""One device profile: export table name (`Instruction`, `DmaPacket`, `Summary`, ...) -> its rows."""

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")
# Spellings seen for each engine: the tables' lower-case keys, the timeline rows (`TensorMatrix` draws
# matmuls, `Tensor` weight loads, both on the PE array) and the hardware names of the glossary.
ENGINE_ALIASES: dict[str, str] = {
    "tensor": "tensor", "tensormatrix": "tensor", "tensor_matrix": "tensor", "pe": "tensor",
    "vector": "vector", "dve": "vector",
    "scalar": "scalar", "act": "scalar", "activation": "scalar",
    "gpsimd": "gpsimd", "pool": "gpsimd",
    "sync": "sync", "sp": "sync",
}
# DmaPacket.queue_type -> the Summary's split of DMA activity; every other queue type is static.
DMA_QUEUE_CLASSES: dict[str, str] = {"software_dynamic": "software_dynamic",
                                     "hardware_dynamic": "hardware_dynamic"}
DMA_CLASSES = ("static", "software_dynamic", "hardware_dynamic")
NS_PER_S = 1_000_000_000


def normalise_engine(name: str | None) -> str | None:
    """`Tensor`, `TensorMatrix`, `PE` -> `tensor`, ...; None for names that are no compute engine."""
    if name is None:
        return None
    return ENGINE_ALIASES.get(name.strip().lower().replace(" ", ""))


@dataclass(frozen=True)
class Window:
    """A half-open time range [start_ns, end_ns) in the profile's clock."""

    start_ns: int
    end_ns: int

    @property
    def length_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 0)


def table(tables: Tables, name: str) -> pa.Table | None:
    """The named table when the export has it with at least one row."""
    found = tables.get(name)
    return found if found is not None and found.num_rows else None


def first_row(tables: Tables, name: str) -> dict[str, object]:
    """The first row of a one-row table (`Metadata`, `Summary`) without its null fields; {} when absent."""
    found = table(tables, name)
    if found is None:
        return {}
    return {k: v for k, v in found.slice(0, 1).to_pylist()[0].items() if v is not None}


def ints(rows: pa.Table, name: str) -> np.ndarray | None:
    """An integer column as int64 (nulls as 0), or None when the table lacks it."""
    if name not in rows.column_names:
        return None
    col = rows.column(name).cast(pa.int64())
    if col.null_count:
        col = pc.fill_null(col, 0)
    return np.asarray(col.to_numpy(), dtype=I64)


def times(rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """`start_ts`, `end_ts` of an interval table as int64 arrays."""
    start, end = ints(rows, "start_ts"), ints(rows, "end_ts")
    if start is None or end is None:
        raise KeyError("an interval table needs start_ts and end_ts")
    return start, end


def strings(rows: pa.Table, name: str) -> np.ndarray:
    """A string column as an object array (None where null or absent)."""
    if name not in rows.column_names:
        return np.full(rows.num_rows, None, dtype=object)
    return np.asarray(rows.column(name).to_pylist(), dtype=object)


def profile_span(tables: Tables) -> Window:
    """The profile's on-device span: `Metadata.first_hw_timestamp`..`last_hw_timestamp`, else the extent of
    its Instruction, DmaPacket and collective rows; (0, 0) for an empty profile."""
    meta = first_row(tables, "Metadata")
    first, last = meta.get("first_hw_timestamp"), meta.get("last_hw_timestamp")
    if isinstance(first, int) and isinstance(last, int) and last >= first:
        return Window(first, last)
    starts, ends = [], []
    for name in ("Instruction", "DmaPacket", "DmaPacketAggregated", "CcOp", "CcInstruction"):
        rows = table(tables, name)
        if rows is not None and "start_ts" in rows.column_names:
            start, end = times(rows)
            starts.append(int(start.min()))
            ends.append(int(end.max()))
    return Window(min(starts), max(ends)) if starts else Window(0, 0)


def window_of(tables: Tables, start_ns: int | None, end_ns: int | None) -> Window:
    """The window asked for; a missing bound is the profile's own."""
    span = profile_span(tables)
    window = Window(span.start_ns if start_ns is None else start_ns, span.end_ns if end_ns is None else end_ns)
    if window.end_ns < window.start_ns:
        raise BadRequest(f"end_ns ({window.end_ns}) is before start_ns ({window.start_ns})")
    return window


def overlap_mask(start: np.ndarray, end: np.ndarray, window: Window) -> np.ndarray:
    """Rows that lie at least partly in the window; a zero-length row counts when it starts inside. An empty
    window holds nothing, not even a row across it."""
    t0, t1 = window.start_ns, window.end_ns
    return (start < t1) & ((end > t0) | (start >= t0)) & (t1 > t0)


def select(rows: pa.Table | None, window: Window, core: int | None) -> pa.Table | None:
    """The rows of an interval table (`start_ts`, `end_ts`) in the window and, when the table has
    `pcore_idx`, on the given physical core."""
    if rows is None:
        return None
    mask = overlap_mask(*times(rows), window)
    if core is not None and "pcore_idx" in rows.column_names:
        pcore = rows.column("pcore_idx").to_numpy(zero_copy_only=False)
        mask &= pcore == core
    return rows if mask.all() else rows.filter(pa.array(mask))


def clip(start: np.ndarray, end: np.ndarray, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to the window (rows outside it become empty)."""
    s = np.clip(start, window.start_ns, window.end_ns)
    return s, np.clip(end, s, window.end_ns)


def union_ns(start: np.ndarray, end: np.ndarray, window: Window) -> int:
    """Length of the union of the intervals inside the window."""
    s, e = clip(start, end, window)
    keep = e > s
    seg_s, seg_e = union_segments(s[keep], e[keep])
    return int((seg_e - seg_s).sum())


def clipped_sum_ns(start: np.ndarray, end: np.ndarray, window: Window) -> int:
    """Plain sum of the interval lengths inside the window (overlaps counted twice)."""
    s, e = clip(start, end, window)
    return int((e - s).sum())


def active_intervals(rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Instruction intervals with their semaphore wait left out: an instruction's `evt_wait_time_ns` is the
    leading part of [start_ts, end_ts) it spent waiting for an event, so it executes over
    [start_ts + evt_wait_time_ns, end_ts)."""
    start, end = times(rows)
    wait = ints(rows, "evt_wait_time_ns")
    if wait is None:
        return start, end
    return start + np.clip(wait, 0, np.maximum(end - start, 0)), end


def prorata(values: np.ndarray, start: np.ndarray, end: np.ndarray, window: Window) -> int:
    """The window's share of a quantity carried by interval rows (FLOPs, bytes): a row inside the window
    counts whole, a row straddling a border counts in proportion to the part of [start_ts, end_ts) inside
    (a zero-length row counts whole when it starts inside). The exact rational sum is rounded once, half
    to even. The rows must already be those in the window (`select`)."""
    whole = (start >= window.start_ns) & (end <= window.end_ns)
    total = int(values[whole].sum())
    cut = Fraction(0)
    for v, s, e in zip(values[~whole].tolist(), start[~whole].tolist(), end[~whole].tolist(), strict=True):
        inside = min(e, window.end_ns) - max(s, window.start_ns)
        cut += Fraction(v * inside, e - s)
    return total + round(cut)


def prorata_sum(rows: pa.Table, name: str, window: Window, mask: np.ndarray | None = None) -> int | None:
    """`prorata` of a column of the rows in the window (of those where `mask` is true, when given); None
    when the table lacks the column."""
    values = ints(rows, name)
    if values is None:
        return None
    start, end = times(rows)
    if mask is not None:
        values, start, end = values[mask], start[mask], end[mask]
    return prorata(values, start, end, window)


def encode(rows: pa.Table, name: str, fn: Callable[[str | None], str | None],
           labels: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Integer codes of `fn(value)` for a column's values (`fn` runs once per distinct value, not per row):
    codes index the returned labels (`labels` extended in place when given), -1 where `fn` gives None or
    the column is absent. Keeps million-row grouping in integer arrays."""
    out = labels if labels is not None else []
    if name not in rows.column_names:
        return np.full(rows.num_rows, -1, np.int32), out
    encoded = pc.dictionary_encode(rows.column(name).combine_chunks().cast(pa.string()))
    index = {label: i for i, label in enumerate(out)}
    lookup = []
    for value in [*encoded.dictionary.to_pylist(), None]:
        label = fn(value)
        if label is not None and label not in index:
            index[label] = len(out)
            out.append(label)
        lookup.append(-1 if label is None else index[label])
    positions = encoded.indices.fill_null(len(encoded.dictionary)).to_numpy()
    return np.asarray(lookup, np.int32)[np.asarray(positions, dtype=I64)], out


def groups(codes: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(code, row indices in row order) for each non-negative code: one stable sort, then slices, so
    grouping a million rows costs one pass instead of one mask per group."""
    order = np.argsort(codes, kind="stable")
    order = order[codes[order] >= 0]
    values, first = np.unique(codes[order], return_index=True)
    bounds = [*first.tolist(), len(order)]
    return [(int(v), order[bounds[i]:bounds[i + 1]]) for i, v in enumerate(values.tolist())]


def engine_codes(rows: pa.Table) -> np.ndarray:
    """Index into ENGINES of each Instruction row's engine (from `engine`, else `timeline_track`), -1 when
    neither names a compute engine."""
    engines = list(ENGINES)
    engine, _ = encode(rows, "engine", normalise_engine, engines)
    track, _ = encode(rows, "timeline_track", normalise_engine, engines)
    return np.where(engine >= 0, engine, track)


def dma_class(queue_type: str | None) -> str:
    """The Summary's DMA class of a `queue_type`: `software_dynamic`, `hardware_dynamic`, else `static`."""
    return DMA_QUEUE_CLASSES.get((queue_type or "").lower(), "static")


def dma_class_codes(rows: pa.Table) -> np.ndarray:
    """Index into DMA_CLASSES of each DMA packet row (by `queue_type`)."""
    codes, _ = encode(rows, "queue_type", dma_class, list(DMA_CLASSES))
    return codes


def dma_rows(tables: Tables) -> pa.Table | None:
    """The DMA transfers: `DmaPacket`, else `DmaPacketAggregated` when only that was written."""
    packets = table(tables, "DmaPacket")
    return packets if packets is not None else table(tables, "DmaPacketAggregated")


@dataclass(frozen=True)
class Peaks:
    """Hardware peaks of the profile's NeuronCore, from `Metadata`: `max_ops` in FLOP per ns (=
    2 x rows x cols x clock in GHz) and `hbm_ddr_bandwidth` in bytes per second, exact as rationals."""

    flops_per_ns: Fraction
    hbm_bytes_per_s: Fraction

    @property
    def max_ops(self) -> Fraction:
        """Peak FLOP/s."""
        return self.flops_per_ns * NS_PER_S

    @property
    def ridge(self) -> Fraction:
        """`peak_flops_bandwidth_ratio` = max_ops / hbm_ddr_bandwidth, FLOP per byte."""
        return self.max_ops / self.hbm_bytes_per_s


def peaks(tables: Tables) -> Peaks | None:
    """The peaks when `Metadata` has the tensor-engine shape, clock and HBM bandwidth (all positive)."""
    meta = first_row(tables, "Metadata")
    rows, cols = meta.get("tensor_engine_num_rows"), meta.get("tensor_engine_num_cols")
    clock, bandwidth = meta.get("tensor_engine_clock_freq"), meta.get("hbm_ddr_bandwidth")
    if not (isinstance(rows, int) and isinstance(cols, int) and isinstance(clock, int | float)
            and isinstance(bandwidth, int | float)) or min(rows, cols, clock, bandwidth) <= 0:
        return None
    return Peaks(2 * rows * cols * Fraction(clock), Fraction(bandwidth))
