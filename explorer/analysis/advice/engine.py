"""The advisor: every rule over one run's inputs, the findings ranked by expected saving. Pure: the caller
(explorer.views.advice) loads the tables and the analyses the rules read."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.advice.compiled import torch_compile_findings
from explorer.analysis.advice.dist import exposed_comm, neuron_findings, stragglers
from explorer.analysis.advice.efficiency import peak_for
from explorer.analysis.advice.finding import Context, rank_findings
from explorer.analysis.advice.fusion import Bandwidth, OpBytes, compute_fusion_findings
from explorer.analysis.advice.host import (
    dataloader_stalls,
    host_bound,
    launch_bound,
    low_occupancy,
    pageable_copies,
    sync_points,
)
from explorer.analysis.advice.launch import blocking_copy, small_grid
from explorer.analysis.advice.ops import build_op_seq
from explorer.analysis.advice.peaks import compute_efficiency, find_peak, peak_json
from explorer.analysis.advice.warmup import find_warmup, warmup_finding
from explorer.model.advice_shapes import AdviceResult, EfficiencyRow, Finding
from explorer.model.device_shapes import RecommendationJson
from explorer.model.shapes import Breakdown, KernelRow, RanksResult

# A finding that would save less than 1/1000 of the profiled span is counted, not listed: on a real model the
# fusion rule finds dozens of tiny chains (a BatchNorm's mul -> add -> add) that bury the findings that matter.
MIN_SAVING_DEN = 1000
RULES = ("unfused-attention", "unfused-elementwise", "host-bound", "launch-bound", "sync-points", "pageable-copies",
         "dataloader-stalls", "low-occupancy", "small-grid", "blocking-copy", "torch-compile-recompiles",
         "exposed-communication", "straggler", "warm-up", "neuron")


@dataclass(frozen=True)
class DeviceRecs:
    """The Neuron recommendations of one device profile."""

    name: str
    profile_id: str
    recs: list[RecommendationJson]


@dataclass(frozen=True)
class AdviceInputs:
    """One run: its cached slice columns and flows, the ops' input shapes (slice id -> Kineto Input Dims text),
    its breakdown, how many steps it marks, its per-rank summary (several ranks) and Neuron recommendations."""

    run_id: str
    origin_ns: int
    span_ns: int
    slices: pa.Table
    flows: pa.Table
    shapes: dict[int, str]
    breakdown: Breakdown
    steps: int = 0
    ranks: RanksResult | None = None
    devices: list[DeviceRecs] = field(default_factory=list)
    device: str = ""  # the device model (Kineto deviceProperties name)
    dtypes: dict[int, str] = field(default_factory=dict)  # op slice id -> its first input's dtype (GEMM, elementwise)
    kernels: list[KernelRow] = field(default_factory=list)  # the kernel table's rows
    num_sms: int = 0  # deviceProperties' numSms (0 unknown)
    grid_blocks: dict[int, int] = field(default_factory=dict)  # kernel slice id -> blocks in its launch grid
    op_bytes: dict[int, int] = field(default_factory=dict)  # op slice id -> bytes one call moves (efficiency.op_work)
    track_ranks: dict[int, int] = field(default_factory=dict)  # track id -> rank, where known


def _bandwidth(inp: AdviceInputs, device: bool) -> tuple[Bandwidth | None, str]:
    """The fusion floor's bandwidth, or why there is none."""
    peak = find_peak(inp.device) if inp.device else None
    if not device:
        return None, "a host-only run (op times are CPU time)"
    if peak is None or peak.hbm is None:
        return None, (f"unknown device “{inp.device}”" if inp.device and peak is None else
                      f"the {peak.model}'s memory bandwidth is not stated" if peak is not None else
                      "no single device model in the run")
    return Bandwidth(peak.hbm, peak.model, inp.dtypes), ""


def compute_advice(inp: AdviceInputs) -> AdviceResult:
    ctx = Context(inp.run_id, inp.origin_ns, max(inp.span_ns, 1), inp.steps)
    device = bool(np.asarray(pc.fill_null(inp.slices.column("device_time"), False)
                             .to_numpy(zero_copy_only=False), bool).any())
    ops = build_op_seq(inp.slices, inp.shapes)
    findings: list[Finding] = compute_fusion_findings(ops, ctx, *_bandwidth(inp, device),
                                                      work=OpBytes(inp.op_bytes, inp.dtypes))
    warmup = find_warmup(inp.slices, inp.origin_ns, inp.shapes, inp.track_ranks)
    warm = warmup_finding(ctx, inp.slices, warmup)
    findings += warm
    if device:  # the gaps inside warm-up are the warm-up finding's, when it is listed
        findings += host_bound(ctx, inp.breakdown, warmup if warm else None)
        findings += launch_bound(ctx, inp.slices, inp.flows, inp.breakdown)
        findings += pageable_copies(ctx, inp.slices) + low_occupancy(ctx, inp.kernels)
        findings += small_grid(ctx, inp.slices, inp.grid_blocks, inp.num_sms) + blocking_copy(ctx, inp.slices)
    findings += sync_points(ctx, inp.slices, inp.breakdown, device) + dataloader_stalls(ctx, inp.slices)
    findings += torch_compile_findings(ctx, inp.slices)
    if inp.ranks is not None and len(inp.ranks["ranks"]) > 1:
        findings += exposed_comm(ctx, inp.ranks) + stragglers(ctx, inp.ranks)
    for d in inp.devices:
        findings += neuron_findings(ctx, d.name, d.profile_id, d.recs)
    listed = [f for f in findings if f["saving_ns"] is None or f["saving_ns"] * MIN_SAVING_DEN >= ctx.span_ns]
    return {"run_id": inp.run_id, "span_ns": inp.span_ns, "steps": inp.steps,
            "time_basis": "device" if device else "cpu", "findings": rank_findings(listed),
            "not_listed": len(findings) - len(listed), "min_saving_ns": ctx.span_ns // MIN_SAVING_DEN,
            "rules": list(RULES), "device": inp.device, "peak": peak_json(inp.device) if inp.device else None,
            "efficiency": _tf32(compute_efficiency(ops, inp.dtypes, inp.device), inp.device)}


def _tf32(rows: list[EfficiencyRow], device: str) -> list[EfficiencyRow]:
    """A float32 GEMM faster than the FP32 peak ran on TF32 tensor cores: its % is of that peak (peak_for's rule)."""
    peak = find_peak(device) if device else None
    for r in rows:
        if peak is not None and r["dtype"] == "float" and r["time_ns"]:
            r["peak_flops_per_s"] = peak_for("gemm", "float", peak, r["flops"] * 10**9 // r["time_ns"])[0]
    return rows
