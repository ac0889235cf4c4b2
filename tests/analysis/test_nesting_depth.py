"""Ancestor queries on trees of any depth: the pointer-jumping answers equal a plain walk up the parents,
and a 100k-deep stack ingests (the old level-by-level walk was quadratic: ~2 minutes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer.analysis.nesting import count_same_lane_ancestors, nearest_ancestor_where


def random_forest(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    parent = np.full(n, -1, dtype=np.int64)
    for i in range(1, n):  # parents before children, a mix of deep chains and bushy levels
        if rng.random() > 0.05:
            parent[i] = i - 1 if rng.random() < 0.7 else int(rng.integers(0, i))
    perm = rng.permutation(n)  # stored order is not topological
    inverse = np.argsort(perm)
    shuffled = np.where(parent[perm] >= 0, inverse[np.maximum(parent[perm], 0)], -1)
    return shuffled, rng.integers(0, 3, n)


def walk_nearest(parent: np.ndarray, mask: np.ndarray, i: int) -> int:
    j = int(parent[i])
    while j >= 0 and not mask[j]:
        j = int(parent[j])
    return j


@pytest.mark.parametrize("seed", range(5))
def test_pointer_jumping_equals_a_walk_up_the_parents(seed: int) -> None:
    parent, lane = random_forest(3000, seed)
    mask = lane == 1
    assert nearest_ancestor_where(parent, mask).tolist() == [walk_nearest(parent, mask, i) for i in range(len(parent))]
    expected = []
    for i in range(len(parent)):
        j, same = int(parent[i]), 0
        while j >= 0:
            same += int(lane[j] == lane[i])
            j = int(parent[j])
        expected.append(same)
    assert count_same_lane_ancestors(parent, lane).tolist() == expected


def test_a_100k_deep_stack_ingests_with_its_depth(tmp_path: Path) -> None:
    n = 100_000
    events = [{"ph": "X", "cat": "cpu_op", "name": f"f{i % 7}", "pid": 1, "tid": 1, "ts": i, "dur": 2 * (n - i)}
              for i in range(n)]
    trace = tmp_path / "deep.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    data = tmp_path / "data"
    exe = Path(sys.executable).parent / "trace-explorer"
    deep_ok = {**os.environ, "EXPLORER_MAX_DEPTH": str(2 * n)}  # past the 10,000-level default on purpose
    done = subprocess.run([str(exe), "ingest", str(trace), "--data-dir", str(data)], capture_output=True, text=True,
                          timeout=120, env=deep_ok)
    assert done.returncode == 0, done.stderr
    runs = json.loads(subprocess.run([str(exe), "runs", "--json", "--data-dir", str(data)], capture_output=True,
                                     text=True, timeout=60, check=True).stdout)
    assert runs[0]["slices"] == n
    from explorer.store.runs import RunStore

    tracks = RunStore(data).table(runs[0]["id"], "tracks").to_pylist()
    assert [t["max_depth"] for t in tracks if t["kind"] == "slice"] == [n - 1]
