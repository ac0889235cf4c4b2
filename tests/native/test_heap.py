"""What a long-running process frees goes back to the system (explorer.native.heap): the heap's free pages below a
block still in use, which glibc keeps by itself, after a trim; after a RunMemo build (a server's timeline index
makes and drops several times what it keeps) and after the table cache drops a run; and a server's Arrow pool is
the system allocator (api/launch.py). Each in a fresh interpreter: the heap and the pool are the process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

# glibc kept from giving anything back by itself: every block from the heap (mmap threshold 32 MiB, its
# largest), its top kept (trim threshold 1 GiB); 200 MiB of 1 MiB blocks freed under a small block made after them
HEAP = r"""
import ctypes, json, sys
libc = ctypes.CDLL(None)
assert libc.mallopt(-3, 32 * 2**20) and libc.mallopt(-1, 2**30)
import numpy as np
from explorer.native.heap import trim_heap
from explorer.store.memo import RunMemo

def rss_mib():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) / 1024

def garbage_then_small():
    blocks = [np.ones(2**17) for _ in range(200)]  # 200 x 1 MiB, every page touched
    small = np.arange(1000)  # made after them: the heap's top is in use when they are freed
    del blocks
    return small

out = {}
if sys.argv[1] == "trim":
    before = rss_mib()
    keep = garbage_then_small()
    out["held"] = rss_mib() - before
    trim_heap()
    out["after"] = rss_mib() - before
else:
    memo = RunMemo(max_entries=2)
    before = rss_mib()
    memo.get("run", "index", garbage_then_small)
    out["after"] = rss_mib() - before
print(json.dumps(out))
"""


def _run(code: str, *args: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap (Linux)")
def test_trim_heap_returns_the_free_pages_below_a_block_in_use() -> None:
    out = _run(HEAP, "trim")
    assert out["held"] > 150  # glibc alone keeps them: the block made last pins the heap's top
    assert out["after"] < 30


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap (Linux)")
def test_a_memo_build_keeps_only_what_it_returns() -> None:
    assert _run(HEAP, "memo")["after"] < 30


SERVE = r"""
import sys
from api.launch import main
sys.argv = ["trace-explorer", sys.argv[1], "--no-such-option"]  # a usage error once prepared (--help prepares nothing)
try:
    main()
except SystemExit:
    pass
import pyarrow as pa
print(pa.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_server_allocates_arrow_memory_from_the_system(command: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}  # not inherited from an earlier test
    proc = subprocess.run([sys.executable, "-c", SERVE, command], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "system"
