"""Breakdowns of a Neuron device profile for any window and core: the opcode summary (per engine and opcode),
DMA by queue type and by transfer size (transfers under SMALL_DMA_BYTES flagged small) and throttling
(`1-k/n`) per physical core and throttle type. Same counting rules as explorer.analysis.device.summary (clip,
merge, pro rata); plain results in ints, ns and fractions of 1 (`*_percent`), no formatting."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa

from explorer.analysis.device.rows import (
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
from explorer.model.device_shapes import DmaJson, DmaQueueTypeJson, DmaSizeJson, OpcodeRowJson, ThrottleJson

SMALL_DMA_BYTES = 4 * 1024
# Transfer-size buckets: [lower, next lower) bytes; the first one is the Explorer's "small transfer".
DMA_SIZE_BOUNDS = (0, SMALL_DMA_BYTES, 32 * 1024, 1024 * 1024)


def _percent(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def compute_opcode_summary(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                           core: int | None = None) -> list[OpcodeRowJson]:
    """Per (engine, opcode) of the Instruction rows in the window, by active time, longest first. A row's
    `active_time_percent` is its active time (union, waits excluded) over the window length, like the
    engine's own active percent; None for an empty window."""
    window = window_of(tables, start_ns, end_ns)
    rows = select(table(tables, "Instruction"), window, core)
    if rows is None:
        return []
    engines = engine_codes(rows)
    opcodes, names = encode(rows, "opcode", lambda v: v or "")
    start, end = times(rows)
    act_start, act_end = active_intervals(rows)
    keys = engines.astype(np.int64) * (len(names) + 1) + opcodes
    out: list[OpcodeRowJson] = []
    for key, mine in groups(np.where(engines >= 0, keys, -1)):
        engine, opcode = divmod(key, len(names) + 1)
        active = union_ns(act_start[mine], act_end[mine], window)
        out.append({"engine": ENGINES[engine], "opcode": names[opcode], "instruction_count": len(mine),
                    "instruction_time_ns": clipped_sum_ns(start[mine], end[mine], window),
                    "active_time_ns": active, "active_time_percent": _percent(active, window.length_ns)})
    return sorted(out, key=lambda r: (-r["active_time_ns"], r["engine"], r["opcode"]))


def compute_dma_breakdown(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                          core: int | None = None) -> DmaJson:
    """DMA packets in the window by queue type (most bytes first; bytes pro rata, averages over whole
    packets) and by transfer size (buckets [min_bytes, max_bytes), the last one unbounded)."""
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
    by_type: list[DmaQueueTypeJson] = []
    for code, mine in groups(kinds):
        active = union_ns(start[mine], end[mine], window)
        named = queues[mine]
        by_type.append({"queue_type": labels[code], "queue_count": len(np.unique(named[named >= 0])),
                        "packet_count": len(mine),
                        "transfer_bytes": prorata(size[mine], start[mine], end[mine], window),
                        "average_bytes": int(size[mine].sum()) / len(mine), "active_time_ns": active,
                        "active_time_percent": _percent(active, window.length_ns)})
    by_type.sort(key=lambda r: (-r["transfer_bytes"], r["queue_type"]))
    buckets: list[DmaSizeJson] = []
    for i, low in enumerate(DMA_SIZE_BOUNDS):
        high = DMA_SIZE_BOUNDS[i + 1] if i + 1 < len(DMA_SIZE_BOUNDS) else None
        mine = (size >= low) & (size < high if high is not None else True)
        buckets.append({"min_bytes": low, "max_bytes": high,
                        "small": high is not None and high <= SMALL_DMA_BYTES, "packet_count": int(mine.sum()),
                        "transfer_bytes": prorata(size[mine], start[mine], end[mine], window),
                        "packet_percent": _percent(int(mine.sum()), rows.num_rows)})
    return {"by_queue_type": by_type, "by_size": buckets,
            "small_packet_count": int((size < SMALL_DMA_BYTES).sum()), "small_bytes": SMALL_DMA_BYTES}


def compute_throttle_summary(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                             core: int | None = None) -> list[ThrottleJson]:
    """One row per (pcore_idx, type) that throttled inside the window. A `Throttle` row limits the core to
    `k/n` of its rate over [timestamp, timestamp + duration); rows of one core and type do not overlap.
    `throttle_active_time_ns` is the time with k < n; the achievable utilisation is 1 - (time-weighted
    throttling `1 - k/n`) / window length; `max_throttling` is the worst `1 - k/n`."""
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
    out: list[ThrottleJson] = []
    for pcore, kind in sorted({(p, str(t)) for p, t in zip(pcores, kinds, strict=True)}, key=str):
        mine = limited & np.asarray([p == pcore and str(t) == kind for p, t in zip(pcores, kinds, strict=True)])
        if not mine.any():
            continue
        s, e = np.clip(start[mine], window.start_ns, window.end_ns), np.clip(end[mine], window.start_ns, window.end_ns)
        lost = sum((Fraction(d * (b - a), b) for d, a, b in
                    zip((e - s).tolist(), k[mine].tolist(), n[mine].tolist(), strict=True)), Fraction(0))
        active = union_ns(start[mine], end[mine], window)
        util = float(1 - lost / window.length_ns) if window.length_ns else None
        worst = max((int(b) - int(a)) / int(b) for a, b in zip(k[mine].tolist(), n[mine].tolist(), strict=True))
        out.append({"pcore_idx": pcore, "throttle_type": kind, "throttle_active_time_ns": active,
                    "throttle_active_time_percent": _percent(active, window.length_ns),
                    "max_achievable_util_with_throttling_percent": util, "max_throttling": worst})
    return out
