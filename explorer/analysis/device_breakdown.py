"""Breakdowns of a Neuron device profile for any window and core: the opcode summary (per engine and opcode),
DMA by queue type and by transfer size (transfers under 4 KiB flagged small) and throttling (`1 - k/n`) per
physical core and throttle type. Same counting rules as explorer.analysis.device (clip, merge, pro rata);
plain results in ints and ns, no formatting.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa

from explorer.analysis.device_rows import (
    ENGINES,
    Tables,
    active_intervals,
    clipped_sum_ns,
    dma_rows,
    encode,
    engine_codes,
    groups,
    ints,
    prorata,
    select,
    strings,
    table,
    times,
    union_ns,
    window_of,
)

SMALL_DMA_BYTES = 4 * 1024
# Transfer-size buckets: [lower, next lower) bytes; the first one is the Explorer's "small transfer".
DMA_SIZE_BOUNDS = (0, SMALL_DMA_BYTES, 32 * 1024, 1024 * 1024)


def _percent(part: int, whole: int) -> float | None:
    return 100 * part / whole if whole else None


@dataclass(frozen=True)
class OpcodeRow:
    """One engine's opcode: `active_time_percent` is its active time (union, waits excluded) over the
    window length, like the engine's own active percent; None for an empty window."""

    engine: str
    opcode: str
    instruction_count: int
    instruction_time_ns: int
    active_time_ns: int
    active_time_percent: float | None


def compute_opcode_summary(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                           core: int | None = None) -> list[OpcodeRow]:
    """Per (engine, opcode) of the Instruction rows in the window, by active time, longest first."""
    window = window_of(tables, start_ns, end_ns)
    rows = select(table(tables, "Instruction"), window, core)
    if rows is None:
        return []
    engines = engine_codes(rows)
    opcodes, names = encode(rows, "opcode", lambda v: v or "")
    start, end = times(rows)
    act_start, act_end = active_intervals(rows)
    keys = engines.astype(np.int64) * (len(names) + 1) + opcodes
    out = []
    for key, mine in groups(np.where(engines >= 0, keys, -1)):
        engine, opcode = divmod(key, len(names) + 1)
        active = union_ns(act_start[mine], act_end[mine], window)
        out.append(OpcodeRow(ENGINES[engine], names[opcode], len(mine),
                             clipped_sum_ns(start[mine], end[mine], window), active,
                             _percent(active, window.length_ns)))
    return sorted(out, key=lambda r: (-r.active_time_ns, r.engine, r.opcode))


@dataclass(frozen=True)
class DmaQueueTypeRow:
    """The DMA packets of one `queue_type` in the window: bytes pro rata, averages over whole packets."""

    queue_type: str
    queue_count: int
    packet_count: int
    transfer_bytes: int
    average_bytes: float
    active_time_ns: int
    active_time_percent: float | None


@dataclass(frozen=True)
class DmaSizeBucket:
    """Packets whose `transfer_bytes` is in [min_bytes, max_bytes) (no upper bound when None)."""

    min_bytes: int
    max_bytes: int | None
    small: bool
    packet_count: int
    transfer_bytes: int
    packet_percent: float | None


@dataclass(frozen=True)
class DmaBreakdown:
    by_queue_type: list[DmaQueueTypeRow]
    by_size: list[DmaSizeBucket]
    small_packet_count: int


def compute_dma_breakdown(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                          core: int | None = None) -> DmaBreakdown:
    """DMA packets in the window by queue type (most bytes first) and by transfer size."""
    window = window_of(tables, start_ns, end_ns)
    rows = select(dma_rows(tables), window, core)
    if rows is None:
        rows = pa.table({"start_ts": pa.array([], pa.int64()), "end_ts": pa.array([], pa.int64()),
                         "transfer_bytes": pa.array([], pa.int64())})
    start, end = times(rows)
    size = ints(rows, "transfer_bytes")
    size = np.zeros(rows.num_rows, np.int64) if size is None else size
    kinds, labels = encode(rows, "queue_type", lambda v: v or "unknown")
    queues, _ = encode(rows, "queue_name", lambda v: v)
    by_type = []
    for code, mine in groups(kinds):
        active = union_ns(start[mine], end[mine], window)
        named = queues[mine]
        by_type.append(DmaQueueTypeRow(
            labels[code], len(np.unique(named[named >= 0])), len(mine),
            prorata(size[mine], start[mine], end[mine], window), int(size[mine].sum()) / len(mine),
            active, _percent(active, window.length_ns)))
    by_type.sort(key=lambda r: (-r.transfer_bytes, r.queue_type))
    buckets = []
    for i, low in enumerate(DMA_SIZE_BOUNDS):
        high = DMA_SIZE_BOUNDS[i + 1] if i + 1 < len(DMA_SIZE_BOUNDS) else None
        mine = (size >= low) & (size < high if high is not None else True)
        buckets.append(DmaSizeBucket(low, high, high is not None and high <= SMALL_DMA_BYTES, int(mine.sum()),
                                     prorata(size[mine], start[mine], end[mine], window),
                                     _percent(int(mine.sum()), rows.num_rows)))
    return DmaBreakdown(by_type, buckets, int((size < SMALL_DMA_BYTES).sum()))


@dataclass(frozen=True)
class ThrottleRow:
    """Throttling of one physical core and throttle type in the window. A `Throttle` row limits the
    core to `k/n` of its rate over [timestamp, timestamp + duration); rows of one core and type do not
    overlap. `throttle_active_time_ns` is the time with k < n; the achievable utilisation is
    1 - (time-weighted throttling `1 - k/n`) / window length; `max_throttling` is the worst `1 - k/n`."""

    pcore_idx: int | None
    throttle_type: str
    throttle_active_time_ns: int
    throttle_active_time_percent: float | None
    max_achievable_util_with_throttling_percent: float | None
    max_throttling: float


def compute_throttle_summary(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                             core: int | None = None) -> list[ThrottleRow]:
    """One row per (pcore_idx, type) that throttled inside the window."""
    window = window_of(tables, start_ns, end_ns)
    rows = table(tables, "Throttle")
    if rows is None:
        return []
    stamp, duration = ints(rows, "timestamp"), ints(rows, "duration")
    assert stamp is not None and duration is not None
    rows = select(rows.append_column("start_ts", pa.array(stamp)).append_column("end_ts", pa.array(stamp + duration)),
                  window, core)
    assert rows is not None
    start, end = times(rows)
    k, n = ints(rows, "k"), ints(rows, "n")
    assert k is not None and n is not None
    limited = (n > 0) & (k < n)
    pcores = rows.column("pcore_idx").to_pylist() if "pcore_idx" in rows.column_names else [None] * rows.num_rows
    kinds = strings(rows, "type").tolist()
    out = []
    for pcore, kind in sorted({(p, str(t)) for p, t in zip(pcores, kinds, strict=True)}, key=str):
        mine = limited & np.asarray([p == pcore and str(t) == kind for p, t in zip(pcores, kinds, strict=True)])
        if not mine.any():
            continue
        s, e = np.clip(start[mine], window.start_ns, window.end_ns), np.clip(end[mine], window.start_ns, window.end_ns)
        lost = sum((Fraction(d * (b - a), b) for d, a, b in
                    zip((e - s).tolist(), k[mine].tolist(), n[mine].tolist(), strict=True)), Fraction(0))
        active = union_ns(start[mine], end[mine], window)
        util = float(100 * (1 - lost / window.length_ns)) if window.length_ns else None
        worst = max((int(b) - int(a)) / int(b) for a, b in zip(k[mine].tolist(), n[mine].tolist(), strict=True))
        out.append(ThrottleRow(pcore, kind, active, _percent(active, window.length_ns), util, worst))
    return out
