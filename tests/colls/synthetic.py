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
