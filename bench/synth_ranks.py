"""Synthetic multi-rank Kineto traces: one file per rank (`rank-N.pt.trace.json`) with distributedInfo,
ProfilerStep#N steps, compute kernels launched from cpu ops, and one NCCL all-reduce per step whose
kernel carries the collective args of recent Kineto (Process Group Name, Seq, In/Out msg nelems, dtype,
Group size). Used by bench/ranks.py (many ranks, many events) and by tests/ranks (small, exact).

The time model, integer ns on one clock: in step s every rank starts at s * step_ns; its kernels run back
to back; it arrives at the all-reduce `ARRIVE_GAP_NS` after its last kernel; every rank's all-reduce
kernel ends `TRANSFER_NS` after the last arrival; the step ends `TAIL_NS` later. `late_rank`'s first
kernel of every step takes `late_ns` longer, so it arrives `late_ns` after the others at each all-reduce.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

BASE_NS = 1_700_000_000_000_000_000
KERNELS = ("ampere_sgemm_128x64_tn", "vectorized_layer_norm_kernel", "GeluCUDAKernelImpl")
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
LEAD_NS = 100_000  # step start -> first kernel
KERNEL_NS = 400_000
ARRIVE_GAP_NS = 10_000
TRANSFER_NS = 2_000_000
TAIL_NS = 50_000
NELEMS = 1 << 20


@dataclass(frozen=True)
class RankPlan:
    """What to write: `world` ranks of `steps` steps with `units` kernels each; one late rank (-1 none);
    `missing` (rank, step) pairs whose all-reduce that rank never calls."""

    world: int = 4
    steps: int = 3
    units: int = 4
    late_rank: int = -1
    late_ns: int = 0
    missing: frozenset[tuple[int, int]] = frozenset()

    @property
    def step_ns(self) -> int:
        return LEAD_NS + self.units * KERNEL_NS + self.late_ns + ARRIVE_GAP_NS + TRANSFER_NS + TAIL_NS + 1_000_000


def us(ns: int) -> str:
    """ns as Kineto's microsecond text, exact to the ns (3 decimals)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def write_rank_traces(folder: Path, plan: RankPlan) -> list[Path]:
    """One trace file per rank in `folder`; returns their paths in rank order."""
    folder.mkdir(parents=True, exist_ok=True)
    return [_write_rank(folder / f"rank-{r}.pt.trace.json", r, plan) for r in range(plan.world)]


def _arrival(rank: int, step: int, plan: RankPlan) -> int:
    late = plan.late_ns if rank == plan.late_rank else 0
    return step * plan.step_ns + LEAD_NS + plan.units * KERNEL_NS + late + ARRIVE_GAP_NS


def _write_rank(path: Path, rank: int, plan: RankPlan) -> Path:
    pid, gpu = 1000 + rank, rank
    head = {"schemaVersion": 1, "deviceProperties": [{"id": gpu, "name": "Synthetic GPU"}],
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": plan.world},
            "baseTimeNanoseconds": BASE_NS}
    with path.open("w") as f:
        f.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        f.write(json.dumps({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}))
        f.write(",\n" + json.dumps({"ph": "M", "name": "process_name", "pid": gpu, "tid": 0,
                                    "args": {"name": f"GPU {gpu}"}}))
        corr = 0
        for s in range(plan.steps):
            start = s * plan.step_ns
            arrive = _arrival(rank, s, plan)
            end = max(_arrival(r, s, plan) for r in range(plan.world)) + TRANSFER_NS
            _x(f, "user_annotation", f"ProfilerStep#{s}", pid, 1, start, end + TAIL_NS - start, {})
            t = start + LEAD_NS
            for u in range(plan.units):
                corr += 1
                dur = KERNEL_NS + (plan.late_ns if rank == plan.late_rank and u == 0 else 0)
                _launch(f, "aten::mm", KERNELS[u % len(KERNELS)], pid, gpu, t, dur, corr, {})
                t += dur
            if (rank, s) in plan.missing:
                continue
            corr += 1
            comm = {"Collective name": "allreduce", "Process Group Name": "0", "Process Group Description": "default_pg",
                    "Seq": s, "In msg nelems": NELEMS, "Out msg nelems": NELEMS, "dtype": "Float",
                    "Group size": plan.world}
            _launch(f, "record_param_comms", NCCL_KERNEL, pid, gpu, arrive, end - arrive, corr, comm)
        f.write("\n]}\n")
    return path


def _x(f: TextIO, cat: str, name: str, pid: int, tid: int, ts: int, dur: int, args: dict[str, object]) -> None:
    f.write(f',\n{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {us(ts)}, "dur": {us(dur)}, "args": {json.dumps(args)}}}')


def _launch(f: TextIO, op: str, kernel: str, pid: int, gpu: int, ts: int, dur: int, corr: int,
            args: dict[str, object]) -> None:
    """A cpu op launching one kernel (cudaLaunchKernel, correlation, ac2g flow); the kernel runs [ts, ts+dur)
    on the GPU's stream 7, the op and launch end on the host before it."""
    host = max(ts - 20_000, 0)
    _x(f, "cpu_op", op, pid, 1, host, 8_000, {"External id": corr, **args})
    _x(f, "cuda_runtime", "cudaLaunchKernel", pid, 1, host + 1_000, 5_000, {"External id": corr, "correlation": corr})
    _x(f, "kernel", kernel, gpu, 7, ts, dur, {"External id": corr, "correlation": corr, "device": gpu, "stream": 7,
                                              **args})
