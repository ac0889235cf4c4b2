"""Constructed Kineto traces of a tensor-parallel decode that all-reduces through PyTorch symmetric memory:
per rank `calls` host ops `symm_mem::multimem_all_reduce_`, each launching the demangled
`multimem_all_reduce_kernel` by a cudaLaunchKernel linked by an ac2g flow, plus one NCCL broadcast with
its collective args (the only collective the matcher used to list). No `record_param_comms`, no `Seq`.
Times are integer µs offsets written as decimal text, so the tests recompute every number exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BASE_NS = 1_700_000_000_000_000_000
SYMM_OP = "symm_mem::multimem_all_reduce_"
SYMM_KERNEL = ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
               "unsigned long, unsigned int**, unsigned long, unsigned long)")
NCCL_KERNEL = "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
DEVICE = "NVIDIA H100 80GB HBM3"


def rank_events(rank: int, calls: int, kernels: bool = True, skew_us: int = 0) -> list[dict[str, Any]]:
    """`calls` all-reduces 100 µs apart (rank r launches `skew_us` * r later), each after a gemm; with
    `kernels` False the device side is absent (a host-only capture of the same code)."""
    pid, dev = 100 + rank, rank
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "main"}},
    ]
    corr = 10_000 * (rank + 1)

    def launch(op: str, kernel: str, t: int, dur: int, kargs: dict[str, Any]) -> None:
        nonlocal corr
        corr += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": 1, "ts": f"{t}.000", "dur": 20,
                   "args": {"External id": corr}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": 1,
                   "ts": f"{t + 5}.000", "dur": 6, "args": {"External id": corr, "correlation": corr}})
        if kernels:
            ev.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": pid, "tid": 1, "ts": f"{t + 5}.000"})
            ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": dev, "tid": 7, "ts": f"{t + 15}.000",
                       "dur": dur, "args": {"External id": corr, "correlation": corr, "device": dev, "stream": 7,
                                            **kargs}})
            ev.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": dev, "tid": 7,
                       "ts": f"{t + 15}.000", "bp": "e"})

    launch("c10d::broadcast_", NCCL_KERNEL, 10 + skew_us * rank, 30,
           {"Collective name": "broadcast", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "BFloat16",
            "Group size": 2, "Process Group Name": "0", "Seq": 0})
    for k in range(calls):
        t = 100 + 100 * k + skew_us * rank
        launch("aten::mm", GEMM, t, 30, {})
        launch(SYMM_OP, SYMM_KERNEL, t + 40, 12 + k % 5, {})
    return ev


def write_rank(path: Path, rank: int, world: int, calls: int, **kw: Any) -> Path:
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS,
           "deviceProperties": [{"id": i, "name": DEVICE} for i in range(world)],
           "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
           "traceEvents": rank_events(rank, calls, **kw)}
    path.write_text(json.dumps(doc))
    return path


def write_run(folder: Path, world: int, calls: int, **kw: Any) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [write_rank(folder / f"rank{r}.json", r, world, calls, **kw) for r in range(world)]
