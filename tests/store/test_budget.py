"""One memory budget for a process's cached tables and derived values (explorer.store.budget): past it the least
recently used go, whichever cache holds them, never those of the run in use; what counts is the arrays' bytes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from explorer.runs.ingest import ingest_paths
from explorer.store.budget import nbytes_of
from explorer.store.memo import RunMemo
from explorer.store.runs import RunStore


def _runs(store: RunStore, tmp_path: Path, n: int) -> list[str]:
    ids = []
    for i in range(n):
        path = tmp_path / f"t{i}.json"
        events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 7}", "pid": 1, "tid": 1, "ts": k * 10,
                   "dur": 5} for k in range(2000)]
        path.write_text(json.dumps({"traceEvents": events}))
        ids.append(ingest_paths(store, [path], f"run {i}").id)
    return ids


def test_past_the_budget_the_least_recently_used_runs_go(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data", cache_runs=10)
    a, b, c = _runs(store, tmp_path, 3)
    one = store.table(a, "slices")
    store.budget.limit_bytes = int(2.5 * one.nbytes)  # room for two runs' slices
    kept = {run: store.table(run, "slices") for run in (a, b, c)}  # c's pushes a, the least recent, out
    assert store.budget.held_bytes() <= store.budget.limit_bytes
    assert store.table(b, "slices") is kept[b] and store.table(c, "slices") is kept[c]
    again = store.table(a, "slices")  # read again; now b is the least recently used, and goes
    assert again is not kept[a] and again.equals(kept[a])
    assert store.table(c, "slices") is kept[c] and store.table(b, "slices") is not kept[b]


def test_the_run_in_use_stays_whole_past_the_budget(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data", cache_runs=10)
    a, b = _runs(store, tmp_path, 2)
    store.budget.limit_bytes = 1  # less than any table
    slices, tracks = store.table(a, "slices"), store.table(a, "tracks")
    assert store.table(a, "slices") is slices and store.table(a, "tracks") is tracks
    store.table(b, "slices")  # another run in use: a's tables go
    assert store.table(a, "tracks") is not tracks


def test_tables_and_derived_values_share_one_budget(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data", cache_runs=10)
    a, b = _runs(store, tmp_path, 2)
    memo = RunMemo(16, store.budget)
    memo.get(a, "index", lambda: np.zeros(200_000, np.int64))  # 1.6 MB derived from run a, the oldest entry
    slices_b = store.table(b, "slices")
    store.budget.limit_bytes = 1_000_000
    store.table(b, "tracks")  # over the budget: run a's index goes first (least recent), b's tables stay
    assert not memo.holds(a, "index") and store.table(b, "slices") is slices_b
    assert memo.get(b, "index", lambda: np.zeros(10, np.int64)).nbytes == 80
    assert store.budget.held_bytes() == slices_b.nbytes + store.table(b, "tracks").nbytes + 80


@dataclass
class _Index:
    ts: np.ndarray
    levels: list[dict[str, np.ndarray]]
    names: list[str]
    table: pa.Table


def test_nbytes_counts_the_arrays_and_tables_inside() -> None:
    value = _Index(ts=np.zeros(10, np.int64), levels=[{"a": np.zeros(4, np.int32)}, {"b": np.zeros(2, np.int8)}],
                   names=["ab", "cde"], table=pa.table({"x": pa.array(np.zeros(3, np.int64))}))
    assert nbytes_of(value) == 80 + 16 + 2 + 5 + 24
    assert nbytes_of(object()) == 0 and nbytes_of(None) == 0
