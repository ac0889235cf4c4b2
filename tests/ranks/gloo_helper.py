"""A real multi-rank capture: torch.distributed (gloo, CPU) on 127.0.0.1, each rank profiling a few steps of
all_reduce / all_gather with torch.profiler and writing one Kineto trace per rank (`rank-N.pt.trace.json`).

One rank (`late_rank`) sleeps LATE_MS (in a `late_input_wait` annotation) before each all_reduce, so it is the
late arriver and every other rank waits for it inside the collective. Each step is a
`record_function("ProfilerStep#N")`, the annotation torch.profiler's own step() writes (its scheduled
capture in this torch keeps only the last step of a CPU-only run). Run as a script by
tests/ranks/conftest.py: spawned processes cannot import a test module.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

STEPS = 6
LATE_MS = 100  # well above what a loaded 2-core box adds to a barrier over the six steps (30 ms was not, once in CI)


def _worker(rank: int, world: int, port: int, out: str, late_rank: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)  # two ranks on a small machine: no intra-op thread pools fighting for cores
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x = torch.ones(64, 64)
    dist.all_reduce(x.clone())  # connect every pair before the profile starts
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(STEPS):
            dist.barrier()  # every rank starts the step together: the steps' lengths compare across ranks
            with record_function(f"ProfilerStep#{step}"):
                y = x @ x
                if rank == late_rank:
                    with record_function("late_input_wait"):  # the evidence the straggler rule should name
                        time.sleep(LATE_MS / 1000)
                dist.all_reduce(y)
                parts = [torch.empty_like(x) for _ in range(world)]
                dist.all_gather(parts, x)
    path = Path(out) / f"rank-{rank}.pt.trace.json"
    prof.export_chrome_trace(str(path.with_suffix(".part")))
    os.replace(path.with_suffix(".part"), path)  # a trace file is there whole or not at all
    dist.barrier()
    # Leave without running gloo's C++ teardown: its destructors abort the process now and then ("terminate
    # called without an active exception", SIGABRT seen in CI) after every trace was written. The traces
    # are complete at this point; mp.spawn sees exit code 0.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(out: str, world: int, port: int, late_rank: int) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(world, port, out, late_rank), nprocs=world, join=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
