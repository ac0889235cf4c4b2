"""The timeline's Python-stack fold keys (explorer/analysis/timeline/fold.py) on a real `torch.profiler(with_stack=True)`
capture: each slice's key from its parents walked one by one, the window's per-track levels from the raw JSON
(decimal times), merged runs never mixing keys, and a run without Python frames keyed by its depths."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from explorer.analysis.timeline.fold import count_ancestors_where, fold_keys
from explorer.analysis.timeline.index import build_timeline_index, compute_window
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore


def _tables(store: RunStore, rid: str) -> tuple[Any, ...]:
    t = store.table
    return t(rid, "slices"), t(rid, "tracks"), t(rid, "counters"), t(rid, "flows")


@pytest.fixture(scope="module")
def stacked(stack_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunStore, str]:
    store = RunStore(tmp_path_factory.mktemp("fold") / "data")
    return store, ingest_paths(store, [stack_trace], "with_stack").id


def json_levels(path: Path) -> dict[int, tuple[int, int]]:
    """Per thread: (deepest Python stack, rows of the other framework events with the frames folded), from the
    JSON alone: the framework events as a stack of [start, end) intervals; one overlapping its parent without
    nesting goes to a sub-row track (left out here, as its own track)."""
    trace = json.loads(path.read_text(), parse_float=Decimal)
    out: dict[int, tuple[int, int]] = {}
    for tid in {e["tid"] for e in trace["traceEvents"] if e.get("cat") == "python_function"}:
        evs = sorted((e["ts"], -e["dur"], e["cat"] == "python_function") for e in trace["traceEvents"]
                     if e.get("ph") == "X" and e.get("tid") == tid
                     and e.get("cat") in ("cpu_op", "user_annotation", "python_function"))
        stack: list[tuple[Decimal, bool]] = []
        python = ops = 0
        for ts, neg_dur, is_py in evs:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and ts - neg_dur > stack[-1][0]:
                continue
            above = sum(1 for _, p in stack if p)
            python, ops = (max(python, above + 1), ops) if is_py else (python, max(ops, len(stack) - above + 1))
            stack.append((ts - neg_dur, is_py))
        out[tid] = (python, ops)
    return out


def test_fold_keys_count_the_python_frames_above_each_slice(stacked: tuple[RunStore, str]) -> None:
    store, rid = stacked
    slices = store.table(rid, "slices")
    depth = slices.column("depth").to_numpy()
    keys = fold_keys(slices, depth)
    assert keys is not None
    parent, cat = slices.column("parent_id").to_pylist(), slices.column("cat").to_pylist()
    lane = slices.column("lane").to_pylist()
    checked = 0
    for i in range(slices.num_rows):  # walk the parents one by one
        above, p = 0, parent[i]
        while p >= 0:
            above += cat[p] == "python_function"
            p = parent[p]
        if lane[i] != "framework":
            want = depth[i]
        elif cat[i] == "python_function":
            want = -1 - above
        else:
            want = depth[i] - above
        assert keys[i] == want, (i, cat[i], depth[i], above)
        checked += cat[i] == "python_function"
    assert checked > 20


def test_window_levels_and_merged_runs_follow_the_keys(stacked: tuple[RunStore, str], stack_trace: Path) -> None:
    store, rid = stacked
    tables = _tables(store, rid)
    ix = build_timeline_index(*tables, store.require_ready(rid).summary.start_ns)
    span = int(ix.ts.max() + ix.dur.max())
    want = json_levels(stack_trace)
    tracks = {r["track_id"]: r for r in tables[1].to_pylist()}
    for width in (4000, 40):  # slices drawn one by one, then nearly everything merged
        w = compute_window(ix, 0, span, width)
        # each thread's own track (a frame overlapping its parent without nesting is on an "(overlap N)" one)
        python = [t for t in w["tracks"] if t.get("py_levels") and "(overlap" not in tracks[t["track_id"]]["label"]]
        assert len(python) == len(want)
        for t in python:
            assert (t["py_levels"], t["op_levels"]) == want[int(tracks[t["track_id"]]["thread"])]
            for part in ("slices", "merged"):
                assert len(t[part]["fold"]) == len(t[part]["ts"])
        if width == 40:  # merged per (depth, fold): each run stands for slices of its own key
            t = max(python, key=lambda x: x["op_levels"])  # the profiled thread (in-process, others may have frames)
            m = t["merged"]
            assert any(f < 0 for f in m["fold"]) and any(f >= 0 for f in m["fold"])
            mine = [s for s in range(len(ix.slice_id)) if int(ix.slice_track[ix.slice_id[s]]) == t["track_id"]]
            for ts, dur, d, f in zip(m["ts"], m["dur"], m["depth"], m["fold"], strict=True):
                assert any(ix.ts[s] >= ts and ix.ts[s] + ix.dur[s] <= ts + dur and ix.depth[s] == d and ix.fold[s] == f
                           for s in mine), (ts, dur, d, f)


def test_a_run_without_python_frames_keys_by_depth(tmp_path: Path) -> None:
    from tests.e2e.conftest import hostile_trace  # a Kineto-shaped trace: cpu_op, runtime, kernels, no frames

    path = tmp_path / "plain.json"
    path.write_text(json.dumps(hostile_trace()))
    store = RunStore(tmp_path / "data")
    rid = ingest_paths(store, [path], "plain").id
    slices = store.table(rid, "slices")
    assert fold_keys(slices, slices.column("depth").to_numpy()) is None
    ix = build_timeline_index(*_tables(store, rid), store.require_ready(rid).summary.start_ns)
    assert np.array_equal(ix.fold, ix.depth)
    w = compute_window(ix, 0, int(ix.ts.max() + ix.dur.max()) + 1, 500)
    assert not any("py_levels" in t for t in w["tracks"])


def test_count_ancestors_where_against_a_walk() -> None:
    rng = np.random.default_rng(7)
    n = 3000
    parent = np.array([-1] + [int(rng.integers(-1, i)) for i in range(1, n)], dtype=np.int64)
    mask = rng.random(n) < 0.4
    got = count_ancestors_where(parent, mask)
    for i in range(n):
        c, p = 0, parent[i]
        while p >= 0:
            c += bool(mask[p])
            p = parent[p]
        assert got[i] == c
