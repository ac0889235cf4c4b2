"""Neuron device-profile tables built in memory for the analysis tests, with the field names and types of
PROFILE_SCHEMA.md (schema 7.4): tiny hand-made rows, an RMSNorm-like memory-bound profile and a matmul
compute-bound one on two physical cores. Also a plain-Python reference of the published Summary definitions
(lists, sorting and fractions; nothing from explorer/), which the tests compare the code against.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pyarrow as pa

BASE_NS = 1_700_000_000_123_456_789  # epoch ns: far beyond float64's exact integers
I64, I32, F64, STR, BOOL = pa.int64(), pa.int32(), pa.float64(), pa.string(), pa.bool_()

INSTRUCTION = pa.schema([
    ("start_ts", I64), ("end_ts", I64), ("duration_ns", I64), ("engine", STR), ("timeline_track", STR),
    ("pcore_idx", I64), ("opcode", STR), ("operands", STR), ("id", I64), ("pc", I64), ("bir_id", STR),
    ("evt_wait_time_ns", I64), ("hlo_name", STR), ("raw_framework_id", I64), ("layer", STR),
    ("nki_source_location", STR), ("hbm_read_bytes", I64), ("hbm_write_bytes", I64),
    ("spill_save_bytes", I64), ("spill_reload_bytes", I64), ("raw_flops", I64), ("flops_transpose", I64),
])
DMA_PACKET = pa.schema([
    ("start_ts", I64), ("end_ts", I64), ("duration_ns", I64), ("pcore_idx", I64), ("id", I64),
    ("packet_idx", I32), ("packet_aggregation_id", I64), ("read_bytes", I64), ("write_bytes", I64),
    ("transfer_bytes", I64), ("throughput", F64), ("queue_type", STR), ("queue_name", STR), ("crc", I64),
])
METADATA = pa.schema([
    ("profile_schema_version", STR), ("ntff_version", I32), ("num_physical_cores", I32), ("vnc_enabled", BOOL),
    ("first_hw_timestamp", I64), ("last_hw_timestamp", I64), ("first_ts", STR), ("last_ts", STR),
    ("dma_ddr_bandwidth", F64), ("num_dma_engines_per_neuroncore", I32), ("hbm_ddr_bandwidth", F64),
    ("tensor_engine_num_rows", I64), ("tensor_engine_num_cols", I64), ("tensor_engine_clock_freq", F64),
    ("neuroncore_clock_freq", F64), ("ticks_per_nanosec", I64),
])
CC_OP = pa.schema([
    ("start_ts", I64), ("end_ts", I64), ("duration_ns", I64), ("operation", STR), ("algorithm", STR),
    ("num_elements", I64), ("dtype", STR), ("op_id", I64), ("stream_id", I64), ("stream_index", I64),
    ("trigger_engine", STR),
])
THROTTLE = pa.schema([("duration", I64), ("k", I32), ("n", I32), ("timestamp", I64), ("type", STR),
                      ("pcore_idx", I64)])


@dataclass(frozen=True)
class Inst:
    """One Instruction row; times relative to BASE_NS."""

    start: int
    dur: int
    engine: str
    opcode: str = "NoOp"
    pcore: int = 0
    wait: int = 0
    flops: int = 0
    transpose: int = 0
    hbm_read: int = 0
    hbm_write: int = 0
    spill_reload: int = 0
    layer: str | None = None
    nki: str | None = None
    track: str | None = None


@dataclass(frozen=True)
class Pkt:
    """One DmaPacket row; times relative to BASE_NS."""

    start: int
    dur: int
    size: int
    queue_type: str = "data"
    queue_name: str = "qSyncIO0"
    pcore: int = 0


@dataclass(frozen=True)
class Peak:
    rows: int = 128
    cols: int = 128
    clock_ghz: float = 1.4
    hbm_bandwidth: float = 6.4e11


def instructions(rows: list[Inst]) -> pa.Table:
    return pa.Table.from_pylist([{
        "start_ts": BASE_NS + r.start, "end_ts": BASE_NS + r.start + r.dur, "duration_ns": r.dur,
        "engine": r.engine, "timeline_track": r.track or r.engine, "pcore_idx": r.pcore, "opcode": r.opcode,
        "operands": "<script>x</script>", "id": i, "pc": 4 * i, "bir_id": f"bir{i}", "evt_wait_time_ns": r.wait,
        "hlo_name": f"hlo.{r.layer}", "raw_framework_id": None if r.layer is None else sum(map(ord, r.layer)), "layer": r.layer,
        "nki_source_location": r.nki, "hbm_read_bytes": r.hbm_read, "hbm_write_bytes": r.hbm_write,
        "spill_save_bytes": 0, "spill_reload_bytes": r.spill_reload, "raw_flops": r.flops,
        "flops_transpose": r.transpose,
    } for i, r in enumerate(rows)], schema=INSTRUCTION)


def packets(rows: list[Pkt]) -> pa.Table:
    return pa.Table.from_pylist([{
        "start_ts": BASE_NS + p.start, "end_ts": BASE_NS + p.start + p.dur, "duration_ns": p.dur,
        "pcore_idx": p.pcore, "id": i, "packet_idx": i % 8, "packet_aggregation_id": i // 8,
        "read_bytes": p.size, "write_bytes": p.size, "transfer_bytes": p.size,
        "throughput": p.size / p.dur * 1e9 if p.dur else 0.0, "queue_type": p.queue_type,
        "queue_name": p.queue_name, "crc": 0,
    } for i, p in enumerate(rows)], schema=DMA_PACKET)


def metadata(span_ns: int, peak: Peak = Peak()) -> pa.Table:
    return pa.Table.from_pylist([{
        "profile_schema_version": "7.4.0", "ntff_version": 2, "num_physical_cores": 2, "vnc_enabled": True,
        "first_hw_timestamp": BASE_NS, "last_hw_timestamp": BASE_NS + span_ns, "first_ts": str(BASE_NS),
        "last_ts": str(BASE_NS + span_ns), "dma_ddr_bandwidth": peak.hbm_bandwidth,
        "num_dma_engines_per_neuroncore": 16, "hbm_ddr_bandwidth": peak.hbm_bandwidth,
        "tensor_engine_num_rows": peak.rows, "tensor_engine_num_cols": peak.cols,
        "tensor_engine_clock_freq": peak.clock_ghz, "neuroncore_clock_freq": peak.clock_ghz,
        "ticks_per_nanosec": 1,
    }], schema=METADATA)


def cc_ops(rows: list[tuple[int, int, str, int]]) -> pa.Table:
    """(start, dur, operation, num_elements) rows."""
    return pa.Table.from_pylist([{
        "start_ts": BASE_NS + s, "end_ts": BASE_NS + s + d, "duration_ns": d, "operation": op,
        "algorithm": "ring", "num_elements": n, "dtype": "bf16", "op_id": i, "stream_id": 0, "stream_index": i,
        "trigger_engine": "sync"} for i, (s, d, op, n) in enumerate(rows)], schema=CC_OP)


def throttles(rows: list[tuple[int, int, int, int, str, int]]) -> pa.Table:
    """(timestamp, duration, k, n, type, pcore) rows."""
    return pa.Table.from_pylist([{"timestamp": BASE_NS + t, "duration": d, "k": k, "n": n, "type": kind,
                                  "pcore_idx": c} for t, d, k, n, kind, c in rows], schema=THROTTLE)


def profile(span_ns: int, insts: list[Inst], pkts: list[Pkt] | None = None,
            **extra: pa.Table) -> dict[str, pa.Table]:
    """A device profile of `span_ns` from BASE_NS: Instruction, Metadata, DmaPacket when given, extras."""
    tables = {"Instruction": instructions(insts), "Metadata": metadata(span_ns), **extra}
    if pkts:
        tables["DmaPacket"] = packets(pkts)
    return tables


def rmsnorm_profile(tiles: int = 8) -> dict[str, pa.Table]:
    """Naive RMSNorm, one tile after another: DMA in (16 KiB packets plus small spill reloads), square and
    mean on Vector, a ones-vector matmul, rsqrt on Scalar, the scale multiply, DMA out. Memory-bound."""
    insts: list[Inst] = []
    pkts: list[Pkt] = []
    for i in range(tiles):
        t = 500 + i * 4_000
        insts.append(Inst(t, 60, "Sync", "DmaTrigger", hbm_read=8 * 16384, spill_reload=4 * 2048, layer="aten::mul"))
        insts.append(Inst(t + 40, 80, "Sync", "SemWait", wait=80))  # waits only: never active
        pkts += [Pkt(t + 60 + 110 * j, 130, 16384, "input", "qSyncIO0") for j in range(8)]
        pkts += [Pkt(t + 70 + 200 * j, 90, 2048, "software_dynamic", "qScalarSpillReload0-Q1-E64") for j in range(4)]
        insts.append(Inst(t + 950, 600, "Vector", "TensorTensor", wait=100, layer="aten::pow"))
        insts.append(Inst(t + 1_550, 400, "Vector", "TensorReduce", layer="aten::mean"))
        insts.append(Inst(t + 1_600, 150, "TensorMatrix", "MATMUL", flops=2 * 128 * 512, layer="aten::mean"))
        insts.append(Inst(t + 1_760, 60, "Tensor", "Transpose", flops=32768, transpose=32768, layer="aten::mean"))
        insts.append(Inst(t + 1_950, 300, "Scalar", "Activate", wait=50, layer="aten::rsqrt"))
        insts.append(Inst(t + 2_100, 500, "Vector", "TensorScalarPtr", layer="aten::mul"))
        insts.append(Inst(t + 2_620, 70, "Sync", "DmaTrigger", hbm_write=8 * 16384, layer="aten::mul"))
        pkts += [Pkt(t + 2_690 + 120 * j, 140, 16384, "output", "qSyncIO1") for j in range(8)]
        pkts.append(Pkt(t + 3_700, 40, 512, "hardware_dynamic", "qHwDge0"))
    insts.append(Inst(100, 200, "GpSimd", "Iota", layer="aten::arange"))
    return profile(tiles * 4_000 + 700, insts, pkts)


def matmul_profile(steps: int = 16) -> dict[str, pa.Table]:
    """A 128x128x512 bf16 matmul loop on two physical cores: LoadStationary on Tensor, MultiplyMoving on
    TensorMatrix (NKI, with source locations), large DMA loads; compute-bound. Plus a few all-reduces."""
    insts: list[Inst] = []
    pkts: list[Pkt] = []
    flops = 2 * 128 * 128 * 512
    for core in (0, 1):
        for i in range(steps):
            t = 300 + i * 520 + core * 37
            nki = f"matmul.py:{40 + i % 3}"
            insts.append(Inst(t, 60, "Sync", "DmaTrigger", core, hbm_read=32768 + 131072, layer="aten::mm", nki=nki))
            insts.append(Inst(t + 20, 100, "Tensor", "LoadStationary", core, wait=20, layer="aten::mm", nki=nki))
            insts.append(Inst(t + 120, 380, "TensorMatrix", "MultiplyMoving", core, flops=flops, layer="aten::mm",
                              nki=nki))
            insts.append(Inst(t + 420, 90, "Vector", "TensorCopy", core, hbm_write=16384 if i % 4 == 3 else 0,
                              layer="aten::mm"))
            pkts.append(Pkt(t - 200, 180, 32768, "input", f"qSyncIO{core}", core))
            pkts.append(Pkt(t - 150, 260, 131072, "input", f"qSyncIO{core}", core))
    cc = cc_ops([(8_600, 400, "AllReduce", 65536), (8_900, 420, "AllReduce", 65536),
                 (9_200, 1_500, "AllReduce", 65536), (9_300, 410, "AllReduce", 65536)])
    return profile(steps * 520 + 1_400, insts, pkts, CcOp=cc)


# ---- the reference: the published definitions, written plainly -------------------------------------

ENGINE_OF = {"Tensor": "tensor", "TensorMatrix": "tensor", "Vector": "vector", "Scalar": "scalar",
             "GpSimd": "gpsimd", "Sync": "sync"}


def union_length(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if reach is None or s > reach:
            total, reach = total + e - s, e
        elif e > reach:
            total, reach = total + e - reach, e
    return total


def overlaps(s: int, e: int, t0: int, t1: int) -> bool:
    return t1 > t0 and s < t1 and (e > t0 or s >= t0)


def cut(s: int, e: int, t0: int, t1: int) -> tuple[int, int]:
    return max(s, t0), min(e, t1)


def share(value: int, s: int, e: int, t0: int, t1: int) -> Fraction:
    """The part of a row's value inside [t0, t1): whole when inside, else pro rata by overlap."""
    if s >= t0 and e <= t1:
        return Fraction(value)
    a, b = cut(s, e, t0, t1)
    return Fraction(value * (b - a), e - s)


def reference_summary(tables: dict[str, pa.Table], t0: int, t1: int, core: int | None = None,
                      model_flops: int | None = None) -> dict[str, int | float]:
    """The Summary metrics of [t0, t1) by PROFILE_SCHEMA.md's definitions, row by row in plain Python."""
    T = t1 - t0
    insts = [r for r in tables["Instruction"].to_pylist() if overlaps(r["start_ts"], r["end_ts"], t0, t1)
             and (core is None or r["pcore_idx"] == core)]
    pk = tables["DmaPacket"].to_pylist() if "DmaPacket" in tables else []
    pk = [p for p in pk if overlaps(p["start_ts"], p["end_ts"], t0, t1) and (core is None or p["pcore_idx"] == core)]
    out: dict[str, int | float] = {"total_time": T / 10**9}
    busy: list[tuple[int, int]] = []
    for engine in ("tensor", "vector", "scalar", "gpsimd", "sync"):
        mine = [r for r in insts if ENGINE_OF[r["engine"]] == engine]
        active = [cut(r["start_ts"] + min(r["evt_wait_time_ns"], r["duration_ns"]), r["end_ts"], t0, t1) for r in mine]
        busy += active
        out[f"{engine}_engine_instruction_count"] = len(mine)
        out[f"{engine}_engine_instruction_time"] = sum(b - a for a, b in (cut(r["start_ts"], r["end_ts"], t0, t1)
                                                                         for r in mine)) / 10**9
        out[f"{engine}_engine_active_time"] = union_length(active) / 10**9
        if T:
            out[f"{engine}_engine_active_time_percent"] = union_length(active) / T
    sums = {"hardware_flops": "raw_flops", "transpose_flops": "flops_transpose", "hbm_read_bytes": "hbm_read_bytes",
            "hbm_write_bytes": "hbm_write_bytes", "spill_reload_bytes": "spill_reload_bytes"}
    for key, col in sums.items():
        out[key] = round(sum((share(r[col], r["start_ts"], r["end_ts"], t0, t1) for r in insts), Fraction(0)))
    dma = [cut(p["start_ts"], p["end_ts"], t0, t1) for p in pk]
    busy += dma
    out["dma_transfer_count"] = len(pk)
    out["dma_transfer_total_bytes"] = round(sum((share(p["transfer_bytes"], p["start_ts"], p["end_ts"], t0, t1)
                                                 for p in pk), Fraction(0)))
    if pk:
        out["dma_transfer_average_bytes"] = sum(p["transfer_bytes"] for p in pk) / len(pk)
    out["dma_active_time"] = union_length(dma) / 10**9
    for cls, kinds in (("static", {"input", "output", "data", "instruction"}),
                       ("software_dynamic", {"software_dynamic"}), ("hardware_dynamic", {"hardware_dynamic"})):
        mine = [p for p in pk if p["queue_type"] in kinds]
        out[f"{cls}_dma_packet_count"] = len(mine)
        out[f"{cls}_dma_active_time"] = union_length([cut(p["start_ts"], p["end_ts"], t0, t1) for p in mine]) / 10**9
    for op in tables["CcOp"].to_pylist() if "CcOp" in tables else []:
        if overlaps(op["start_ts"], op["end_ts"], t0, t1):
            busy.append(cut(op["start_ts"], op["end_ts"], t0, t1))
    out["total_active_time"] = union_length(busy) / 10**9
    if T:
        out["dma_active_time_percent"] = union_length(dma) / T
        out["total_active_time_percent"] = union_length(busy) / T
    out.update(reference_ratios(tables, out, T, model_flops))
    return out


def reference_ratios(tables: dict[str, pa.Table], m: dict[str, int | float], T: int,
                     model_flops: int | None) -> dict[str, float]:
    """MFU/HFU/MBU and intensity from Metadata: max_ops = 2 x rows x cols x clock (GHz -> per ns)."""
    meta = tables["Metadata"].to_pylist()[0]
    flops_per_ns = 2 * meta["tensor_engine_num_rows"] * meta["tensor_engine_num_cols"] * Fraction(
        meta["tensor_engine_clock_freq"])
    bandwidth_per_ns = Fraction(meta["hbm_ddr_bandwidth"]) / 10**9
    hw, tr = int(m["hardware_flops"]), int(m["transpose_flops"])
    hbm = int(m["hbm_read_bytes"]) + int(m["hbm_write_bytes"])
    out: dict[str, float] = {"peak_flops_bandwidth_ratio": float(flops_per_ns / bandwidth_per_ns)}
    if hbm:
        out["mm_arithmetic_intensity"] = float(Fraction(hw - tr, hbm))
    if T:
        out["hfu_estimated_percent"] = float(hw / (flops_per_ns * T))
        out["mfu_inst_estimated_percent"] = float((hw - tr) / (flops_per_ns * T))
        out["mbu_estimated_percent"] = float(hbm / (bandwidth_per_ns * T))
        if model_flops is not None:
            out["mfu_estimated_percent"] = float(model_flops / (flops_per_ns * T))
    return out


def summary_table(row: dict[str, int | float]) -> pa.Table:
    """A one-row Summary table with the Summary's types (int64 counts/bytes/FLOPs, float64 otherwise)."""
    return pa.Table.from_pylist([row], schema=pa.schema([(k, I64 if isinstance(v, int) else F64)
                                                         for k, v in row.items()]))
