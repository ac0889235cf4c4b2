"""Fixtures of the collectives tests: constructed NCCL runs (a 4-rank straggler, a rank missing a
collective with and without sequence numbers) and a real 2-rank gloo capture made with torch.distributed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from tests.analysis.collectives.synthetic import straggler_calls, write_run
from tests.helpers.support import free_port

GLOO_STEPS = 3
GLOO_LATE_RANK = 1
GLOO_SLEEP_S = 0.2

GLOO_SCRIPT = r"""
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.profiler import profile, ProfilerActivity

def work(rank, world, port, out, steps, late, sleep_s):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(1024)
    dist.all_reduce(t.clone())  # every pair connected before the profile starts
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        dist.barrier()  # the ranks start the steps together: profiler start-up skew is not the straggler
        for _ in range(steps):
            if rank == late:
                time.sleep(sleep_s)  # this rank really is the last to arrive at every all_reduce
            dist.all_reduce(t)
            dist.all_gather([torch.zeros(256) for _ in range(world)], torch.ones(256))
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.pt.trace.json"))
    dist.barrier()  # no rank tears the group down while another still talks to it (gloo aborts then)
    dist.destroy_process_group()

if __name__ == "__main__":
    port, out, steps, late, sleep_s = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    mp.spawn(work, args=(2, port, out, steps, late, sleep_s), nprocs=2)
"""


@pytest.fixture(scope="session")
def gloo_traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two real torch.profiler traces (rank 0, rank 1) of all_reduce + all_gather over gloo on CPU."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo")
    script = out / "gloo_job.py"
    script.write_text(GLOO_SCRIPT)
    for _attempt in range(2):  # a free port can be taken by another process before the job binds it
        try:  # two processes importing torch on a loaded 2-core box: minutes, at worst
            job = subprocess.run([sys.executable, str(script), str(free_port()), str(out), str(GLOO_STEPS),
                                  str(GLOO_LATE_RANK), str(GLOO_SLEEP_S)], timeout=300, capture_output=True, text=True,
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the gloo job did not finish in {exc.timeout} s")
        if job.returncode == 0:
            break
    else:
        pytest.fail(f"the gloo job failed: {job.stderr[-2000:]}")
    return [out / "rank0.pt.trace.json", out / "rank1.pt.trace.json"]


@pytest.fixture(scope="session")
def colls_store(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    return RunStore(tmp_path_factory.mktemp("colls-data"))


@pytest.fixture(scope="session")
def straggler_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_run(tmp_path_factory.mktemp("straggler"), {r: straggler_calls(r) for r in range(4)})


@pytest.fixture(scope="session")
def straggler_run(colls_store: RunStore, straggler_files: list[Path]) -> str:
    return ingest_paths(colls_store, straggler_files, "4-rank straggler").id
