"""Constructed multi-rank Kineto traces with NCCL all-reduce kernels: one file per rank, each with its
distributedInfo, a cudaLaunchKernel per kernel linked by an ac2g flow, and the kernel's collective args.
Times are integer µs offsets written as decimal text, so the tests recompute every number exactly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_NS = 1_700_000_000_000_000_000
PG = "0"
KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
NELEMS = 1_048_576  # float: 4 MiB per all-reduce


@dataclass(frozen=True)
class Call:
    """One rank's all-reduce: launch at `launch_us`, kernel [start_us, end_us) (µs from BASE_NS)."""

    seq: int
    launch_us: int
    start_us: int
    end_us: int


def straggler_calls(rank: int, steps: int = 4, late_rank: int = 2, late_us: int = 5_000, world: int = 4) -> list[Call]:
    """Step k launches at 20 ms * k + 100 µs * rank (+5 ms on the late rank); every kernel starts 10 µs
    after its launch and ends when the last rank's kernel started plus 800 µs (all-reduce semantics)."""
    def launch(k: int, r: int) -> int:
        return 20_000 * k + 100 * r + (late_us if r == late_rank else 0)

    return [Call(k, launch(k, rank), launch(k, rank) + 10, max(launch(k, r) for r in range(world)) + 10 + 800)
            for k in range(steps)]


def rank_events(rank: int, calls: list[Call], with_seq: bool = True, name: str = "allreduce",
                group_size: int = 4) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 100 + rank, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 100 + rank, "tid": 1, "args": {"name": "main"}},
    ]
    for i, c in enumerate(calls):
        corr = 1000 * (rank + 1) + i
        args: dict[str, Any] = {"External id": corr, "correlation": corr, "device": rank, "stream": 7,
                                "Collective name": name, "In msg nelems": NELEMS, "Out msg nelems": NELEMS,
                                "Group size": group_size, "dtype": "Float", "Process Group Name": PG}
        if with_seq:
            args["Seq"] = c.seq
        ev += [
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100 + rank, "tid": 1,
             "ts": f"{c.launch_us - 5}.000", "dur": 20, "args": {"External id": corr, "Collective name": name}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100 + rank, "tid": 1,
             "ts": f"{c.launch_us}.000", "dur": 4, "args": {"External id": corr, "correlation": corr}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 100 + rank, "tid": 1, "ts": f"{c.launch_us}.000"},
            {"ph": "X", "cat": "kernel", "name": KERNEL, "pid": rank, "tid": 7, "ts": f"{c.start_us}.000",
             "dur": c.end_us - c.start_us, "args": args},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": rank, "tid": 7, "ts": f"{c.start_us}.000",
             "bp": "e"},
        ]
    return ev


def write_rank(path: Path, rank: int, world: int, calls: list[Call], **kw: Any) -> Path:
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS,
           "deviceProperties": [{"id": rank, "name": "Fake GPU"}],
           "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
           "traceEvents": rank_events(rank, calls, **kw)}
    path.write_text(json.dumps(doc))
    return path


def write_run(folder: Path, calls_by_rank: dict[int, list[Call]], **kw: Any) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    world = len(calls_by_rank)
    return [write_rank(folder / f"rank-{r}.json", r, world, c, **kw) for r, c in sorted(calls_by_rank.items())]


# ---- a training-step run: ProfilerStep#N, compute kernels, one all_to_all per step --------------------------

A2A_KERNEL = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "ampere_sgemm_128x64_tn"
NORM = "vectorized_layer_norm_kernel"
EXTRA = "late_gather_kernel"


@dataclass(frozen=True)
class StepPlan:
    """`world` ranks of `steps` steps. Rank r starts step k at k * step_us + 300 + 10 r µs; `victim_rank`
    at k * step_us (first: it waits longest in the all_to_all and has the longest step); `late_rank`
    `late_start_us` later than its slot and runs an extra kernel of `extra_us` before the all_to_all (it
    arrives last: the straggler). Kernels run back to back from 100 µs into the step: gemm 1000 + 20 r µs,
    layer norm 300 µs (then the late rank's extra kernel), 10 µs later the all_to_all, launched 30 µs
    before it starts (its arrival); every rank's all_to_all ends 400 µs after the last one started and
    every step ends 100 µs after that."""

    world: int = 8
    steps: int = 3
    late_rank: int = 5
    victim_rank: int = 1
    late_start_us: int = 1_500
    extra_us: int = 1_000
    step_us: int = 20_000

    def start_us(self, k: int, r: int) -> int:
        off = 0 if r == self.victim_rank else 300 + 10 * r
        return k * self.step_us + off + (self.late_start_us if r == self.late_rank else 0)

    def kernels(self, k: int, r: int) -> list[tuple[str, int, int]]:
        """Rank r's compute kernels of step k as (name, start µs, end µs)."""
        t = self.start_us(k, r) + 100
        out = [(GEMM, t, t + 1000 + 20 * r), (NORM, t + 1000 + 20 * r, t + 1300 + 20 * r)]
        if r == self.late_rank:
            out.append((EXTRA, out[-1][2], out[-1][2] + self.extra_us))
        return out

    def a2a_start_us(self, k: int, r: int) -> int:
        return self.kernels(k, r)[-1][2] + 10

    def a2a_end_us(self, k: int) -> int:
        return max(self.a2a_start_us(k, r) for r in range(self.world)) + 400


def step_rank_events(plan: StepPlan, rank: int) -> list[dict[str, Any]]:
    """One rank's trace events: host pid 100 + rank (thread 1), its GPU pid `rank` (stream 7)."""
    pid, corr = 100 + rank, 1000 * (rank + 1)
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"GPU {rank}"}},
    ]

    def launch(op: str, kernel: str, start: int, end: int, args: dict[str, Any]) -> None:
        nonlocal corr
        corr += 1
        ev.extend([
            {"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": 1, "ts": f"{start - 40}.000", "dur": 20,
             "args": {"External id": corr, **args}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": 1,
             "ts": f"{start - 30}.000", "dur": 5, "args": {"External id": corr, "correlation": corr}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": pid, "tid": 1, "ts": f"{start - 30}.000"},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": rank, "tid": 7, "ts": f"{start}.000",
             "dur": end - start, "args": {"External id": corr, "correlation": corr, "device": rank, "stream": 7,
                                          **args}},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": rank, "tid": 7, "ts": f"{start}.000",
             "bp": "e"},
        ])

    for k in range(plan.steps):
        s = plan.start_us(k, rank)
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": pid, "tid": 1,
                   "ts": f"{s}.000", "dur": plan.a2a_end_us(k) + 100 - s, "args": {}})
        for name, a, b in plan.kernels(k, rank):
            launch("aten::gather" if name == EXTRA else "aten::mm", name, a, b, {})
        launch("record_param_comms", A2A_KERNEL, plan.a2a_start_us(k, rank), plan.a2a_end_us(k),
               {"Collective name": "all_to_all", "Process Group Name": PG, "Seq": k, "In msg nelems": NELEMS,
                "Out msg nelems": NELEMS, "dtype": "Float", "Group size": plan.world})
    return ev


def write_step_run(folder: Path, plan: StepPlan) -> list[Path]:
    """One `rank-N.json` per rank (distributedInfo, deviceProperties), in rank order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(plan.world):
        doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "deviceProperties": [{"id": r, "name": "Fake GPU"}],
               "distributedInfo": {"backend": "nccl", "rank": r, "world_size": plan.world},
               "traceEvents": step_rank_events(plan, r)}
        path = folder / f"rank-{r}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths
