"""Summary metrics of a Neuron device profile, named exactly as the export's `Summary` fields: the export's
own row for the whole profile, or the same metrics recomputed from the raw `Instruction`, `DmaPacket`,
`CcOp` and `CcInstruction` rows for the whole profile, any window or one physical core (PROFILE_SCHEMA.md's
definitions; the counting rules are in `recompute_device_summary`). Times stay int64 ns until the final
float seconds; `*_percent` fields are fractions of 1, as the export writes them; formatting is elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.device.rows import (
    DMA_CLASSES,
    ENGINES,
    NS_PER_S,
    Tables,
    Window,
    active_intervals,
    clipped_sum_ns,
    dma_class_codes,
    dma_rows,
    engine_codes,
    first_row,
    ints,
    peaks,
    profile_span,
    prorata,
    prorata_sum,
    select,
    table,
    times,
    union_ns,
    window_of,
)

Metrics = dict[str, int | float]
Intervals = list[tuple[np.ndarray, np.ndarray]]

# Summary field -> the Instruction column whose values it sums (pro rata in a window).
INSTRUCTION_SUMS: dict[str, str] = {
    "hardware_flops": "raw_flops",
    "transpose_flops": "flops_transpose",
    "adjusted_hardware_flops": "adjusted_flops",
    "adjusted_transpose_flops": "adjusted_flops_transpose",
    **{f: f for f in ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes",
                      "spill_save_bytes", "spill_reload_bytes", "psum_read_bytes", "psum_write_bytes",
                      "psum_read_sbuf_write_bytes", "input_queue_bytes", "output_queue_bytes",
                      "weight_queue_bytes")},
}
# Summary prefix -> the collective table whose intervals it measures.
COLLECTIVE_TABLES = {"cc_op": "CcOp", "cc_cores_instruction": "CcInstruction"}


@dataclass(frozen=True)
class DeviceSummary:
    """The Summary metrics of [start_ns, end_ns) (profile clock) on `core` (every core when None).
    `from_export` names the metrics taken as published from the export's `Summary` row; the rest were
    recomputed from raw rows. A metric that cannot be known (a percent of an empty window, MFU without
    model FLOPs, anything from a table the export lacks) is absent, never zero."""

    start_ns: int
    end_ns: int
    core: int | None
    metrics: Metrics
    from_export: frozenset[str]


def compute_device_summary(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                           core: int | None = None) -> DeviceSummary:
    """The profile's Summary: without window or core, the export's own `Summary` row where one exists
    (metrics it lacks are recomputed); otherwise recomputed for the window (a missing bound is the
    profile's) and core."""
    summary = recompute_device_summary(tables, start_ns, end_ns, core)
    if start_ns is not None or end_ns is not None or core is not None:
        return summary
    published = {k: v for k, v in first_row(tables, "Summary").items()
                 if isinstance(v, int | float) and not isinstance(v, bool)}
    return DeviceSummary(summary.start_ns, summary.end_ns, None, {**summary.metrics, **published},
                         frozenset(published))


def recompute_device_summary(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                             core: int | None = None) -> DeviceSummary:
    """The Summary metrics recomputed from raw rows (never the export's `Summary` row) by the published
    definitions; with no window, over the whole profile span (`Metadata` first..last hardware timestamp).

    Counting: intervals are cut to the window and merged (union) per engine, per DMA class and overall;
    an instruction's semaphore wait (`evt_wait_time_ns`, the leading part of its interval) is never
    active time. FLOPs and bytes of a row that straddles a border count pro rata by the part of
    [start_ts, end_ts) inside (exact rational sum, rounded once); counts and `dma_transfer_average_bytes`
    take every row that overlaps the window, whole. `total_time` is the window's length. Model FLOPs are
    not in the raw rows: they come from the export's `Summary` for the whole profile on all cores and
    are left out (with `mfu_estimated_percent`) otherwise. Collective tables have no `pcore_idx`, so a
    core filter keeps all their rows. Only rows overlapping the window matter: a caller may pass tables
    already cut to them (a pushed-down read) and get the same result."""
    span = profile_span(tables)
    window = window_of(tables, start_ns, end_ns)
    metrics: Metrics = {"total_time": window.length_ns / NS_PER_S}
    busy: Intervals = []
    instructions = select(table(tables, "Instruction"), window, core)
    if instructions is not None:
        busy.append(_engine_metrics(metrics, instructions, window))
        for field, column in INSTRUCTION_SUMS.items():
            value = prorata_sum(instructions, column, window)
            if value is not None:
                metrics[field] = value
    packets = select(dma_rows(tables), window, core)
    if packets is not None:
        busy.append(_dma_metrics(metrics, packets, window))
    for prefix, name in COLLECTIVE_TABLES.items():
        rows = select(table(tables, name), window, None)  # collectives carry no pcore_idx
        if rows is not None:
            busy.append(_collective_metrics(metrics, prefix, rows, window))
    if busy:
        _put_time(metrics, "total_active_time", union_ns(np.concatenate([s for s, _ in busy]),
                                                         np.concatenate([e for _, e in busy]), window), window)
    whole = window == span and core is None
    model_flops = first_row(tables, "Summary").get("model_flops") if whole else None
    _ratio_metrics(metrics, tables, window, model_flops if isinstance(model_flops, int) else None)
    return DeviceSummary(window.start_ns, window.end_ns, core, metrics, frozenset())


def _put_time(metrics: Metrics, key: str, ns: int, window: Window) -> None:
    """`key` in seconds and `key_percent`, its fraction of the window (absent for an empty window)."""
    metrics[key] = ns / NS_PER_S
    if window.length_ns:
        metrics[f"{key}_percent"] = ns / window.length_ns


def _engine_metrics(metrics: Metrics, rows: pa.Table, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """Per engine: instruction count and time (plain sum) and active time (union, waits excluded).
    Returns the active intervals of all engine instructions, for the total."""
    engines = engine_codes(rows)
    start, end = times(rows)
    act_start, act_end = active_intervals(rows)
    for code, engine in enumerate(ENGINES):
        mine = engines == code
        metrics[f"{engine}_engine_instruction_count"] = int(mine.sum())
        metrics[f"{engine}_engine_instruction_time"] = clipped_sum_ns(start[mine], end[mine], window) / NS_PER_S
        _put_time(metrics, f"{engine}_engine_active_time", union_ns(act_start[mine], act_end[mine], window),
                  window)
    known = engines >= 0
    return act_start[known], act_end[known]


def _dma_metrics(metrics: Metrics, rows: pa.Table, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """Transfers, bytes, active time overall and per class (static / software / hardware dynamic)."""
    start, end = times(rows)
    size = ints(rows, "transfer_bytes")
    size = np.zeros(rows.num_rows, np.int64) if size is None else size
    count, total = rows.num_rows, prorata(size, start, end, window)
    metrics["dma_transfer_count"] = count
    metrics["dma_transfer_total_bytes"] = total
    if count:
        metrics["dma_transfer_average_bytes"] = int(size.sum()) / count
    if "queue_name" in rows.column_names:
        metrics["dma_queue_count"] = pc.count_distinct(rows.column("queue_name"), mode="only_valid").as_py()
    _put_time(metrics, "dma_active_time", union_ns(start, end, window), window)
    classes = dma_class_codes(rows)
    dynamic = classes != DMA_CLASSES.index("static")
    if window.length_ns:
        metrics["dynamic_dma_active_time_percent"] = (
            union_ns(start[dynamic], end[dynamic], window) / window.length_ns)
    parts = {"dynamic": dynamic} | {c: classes == i for i, c in enumerate(DMA_CLASSES)}
    for name, mine in parts.items():
        part_count = int(mine.sum())
        part_size = prorata(size[mine], start[mine], end[mine], window)
        if name != "dynamic":
            _put_time(metrics, f"{name}_dma_active_time", union_ns(start[mine], end[mine], window), window)
            metrics[f"{name}_dma_packet_count"] = part_count
            metrics[f"{name}_dma_size"] = part_size
        if count:
            metrics[f"{name}_dma_packet_percent"] = part_count / count
        if total:
            metrics[f"{name}_dma_size_percent"] = part_size / total
    return start, end


def _collective_metrics(metrics: Metrics, prefix: str, rows: pa.Table,
                        window: Window) -> tuple[np.ndarray, np.ndarray]:
    """Count, plain time and active time (union) of the collective ops or CC-core instructions."""
    start, end = times(rows)
    metrics[f"{prefix}_count"] = rows.num_rows
    metrics[f"{prefix}_time"] = clipped_sum_ns(start, end, window) / NS_PER_S
    _put_time(metrics, f"{prefix}_active_time", union_ns(start, end, window), window)
    return start, end


def _ratio_metrics(metrics: Metrics, tables: Tables, window: Window, model_flops: int | None) -> None:
    """MFU / HFU / MBU, arithmetic intensity and the roofline ceiling against the `Metadata` peaks."""
    hardware, transpose = metrics.get("hardware_flops"), metrics.get("transpose_flops", 0)
    read, write = metrics.get("hbm_read_bytes"), metrics.get("hbm_write_bytes")
    hbm = None if read is None or write is None else int(read) + int(write)
    intensity = None
    if hardware is not None and hbm:
        intensity = Fraction(int(hardware) - int(transpose), hbm)
        metrics["mm_arithmetic_intensity"] = float(intensity)
    if model_flops is not None:
        metrics["model_flops"] = model_flops
    peak = peaks(tables)
    if peak is None:
        return
    metrics["peak_flops_bandwidth_ratio"] = float(peak.ridge)
    if intensity is not None:
        metrics["mfu_max_achievable_estimated_percent"] = float(min(Fraction(1), intensity / peak.ridge))
    if not window.length_ns:
        return
    capacity = peak.flops_per_ns * window.length_ns  # FLOPs the tensor engine could do in the window
    if hardware is not None:
        metrics["hfu_estimated_percent"] = float(int(hardware) / capacity)
        metrics["mfu_inst_estimated_percent"] = float((int(hardware) - int(transpose)) / capacity)
    if model_flops is not None:
        metrics["mfu_estimated_percent"] = float(model_flops / capacity)
    if hbm is not None:
        metrics["mbu_estimated_percent"] = float(
            Fraction(hbm * NS_PER_S, window.length_ns) / peak.hbm_bytes_per_s)
