"""The SQL page's example queries run on real traces, and their numbers match the raw trace JSON.

A GPU trace (HTA's A100 alexnet capture, ../shared/traces) for device executions and gaps; a CPU
torch.profiler trace recorded here with profile_memory=True for the op shapes and memory peaks.
Truth is computed from the JSON text with decimal arithmetic, not from the store.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from explorer.store.sql import SQL_EXAMPLES, run_sql

GPU_TRACE = "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
EXAMPLES = {e.key: e.sql for e in SQL_EXAMPLES}
CPU_SCRIPT = r"""
import sys, torch
from torch.profiler import profile, ProfilerActivity
torch.set_num_threads(1)
x = torch.randn(64, 256)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
    for n in (64, 128):
        y = torch.randn(n, 256) @ x.T
        z = (y * y).sum(-1)
prof.export_chrome_trace(sys.argv[1])
"""


def ns(text: Decimal) -> int:
    """µs (as the JSON's decimal text) -> integer ns."""
    return int(text * 1000)


def raw_events(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        events: list[dict[str, Any]] = json.load(f, parse_float=Decimal)["traceEvents"]
    return events


def query(store: RunStore, run_id: str, sql: str) -> list[dict[str, Any]]:
    result = run_sql(store, run_id, sql, 30.0, 10000)
    assert not result.truncated
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> tuple[RunStore, str, Path]:
    store = RunStore(tmp_path_factory.mktemp("sql-gpu"))
    path = shared_traces / GPU_TRACE
    return store, ingest_paths(store, [path], "alexnet").id, path


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunStore, str, Path]:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    d = tmp_path_factory.mktemp("sql-cpu")
    trace = d / "cpu_memory.json"
    proc = subprocess.run([sys.executable, "-c", CPU_SCRIPT, str(trace)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    store = RunStore(d / "data")
    return store, ingest_paths(store, [trace], "cpu memory").id, trace


@pytest.mark.shared
def test_top_kernels_match_the_trace(gpu_run: tuple[RunStore, str, Path]) -> None:
    store, run_id, path = gpu_run
    totals: dict[str, list[int]] = defaultdict(list)
    for ev in raw_events(path):
        if ev.get("ph") == "X" and ev.get("cat") in DEVICE_CATS:
            totals[ev["name"]].append(ns(ev["dur"]))
    rows = query(store, run_id, EXAMPLES["top_kernels"])
    expected = sorted(totals.items(), key=lambda kv: -sum(kv[1]))[:50]
    assert [(r["name"], r["calls"], r["total_ns"], r["max_ns"]) for r in rows] == [
        (name, len(d), sum(d), max(d)) for name, d in expected]


@pytest.mark.shared
def test_gaps_over_1ms_match_the_trace(gpu_run: tuple[RunStore, str, Path]) -> None:
    store, run_id, path = gpu_run
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for ev in raw_events(path):
        if ev.get("ph") == "X" and ev.get("cat") in DEVICE_CATS:
            start = ns(ev["ts"])
            spans[ev["args"]["device"]].append((start, start + ns(ev["dur"])))
    gaps = []
    for device_spans in spans.values():
        device_spans.sort()
        reach = device_spans[0][1]
        for start, end in device_spans[1:]:
            if start - reach > 1_000_000:
                gaps.append(start - reach)
            reach = max(reach, end)
    rows = query(store, run_id, EXAMPLES["gaps_1ms"])
    assert len(gaps) >= 5  # the capture idles between iterations: the example has rows to show
    assert [r["gap_ns"] for r in rows] == sorted(gaps, reverse=True)[:100]
    assert {r["device"] for r in rows} == {"GPU 0"}


@pytest.mark.shared
@pytest.mark.parametrize("key", [e.key for e in SQL_EXAMPLES])
def test_every_example_runs_on_a_gpu_trace(gpu_run: tuple[RunStore, str, Path], key: str) -> None:
    store, run_id, _ = gpu_run
    rows = query(store, run_id, EXAMPLES[key])
    assert rows or key == "memory_peaks"  # this capture was recorded without profile_memory


@pytest.mark.parametrize("key", [e.key for e in SQL_EXAMPLES])
def test_every_example_runs_on_a_cpu_torch_trace(cpu_run: tuple[RunStore, str, Path], key: str) -> None:
    store, run_id, _ = cpu_run
    rows = query(store, run_id, EXAMPLES[key])
    assert rows or key in ("top_kernels", "gaps_1ms")  # no device on this trace


def test_memory_peaks_match_the_trace(cpu_run: tuple[RunStore, str, Path]) -> None:
    store, run_id, path = cpu_run
    peaks: dict[str, list[int]] = defaultdict(list)
    for ev in raw_events(path):
        if ev.get("name") == "[memory]":
            peaks["allocated"].append(int(ev["args"]["Total Allocated"]))
            peaks["reserved"].append(int(ev["args"]["Total Reserved"]))
    rows = {r["series"]: r for r in query(store, run_id, EXAMPLES["memory_peaks"])}
    assert rows["memory allocated (CPU) [bytes]"]["peak_bytes"] == max(peaks["allocated"]) > 0
    assert rows["memory allocated (CPU) [bytes]"]["samples"] == len(peaks["allocated"])
    assert rows["memory reserved (CPU) [bytes]"]["peak_bytes"] == max(peaks["reserved"])


def test_ops_by_shape_match_the_trace(cpu_run: tuple[RunStore, str, Path]) -> None:
    store, run_id, path = cpu_run
    calls: dict[tuple[str, str], int] = defaultdict(int)
    for ev in raw_events(path):
        if ev.get("ph") == "X" and ev.get("cat") == "cpu_op" and ev["name"] == "aten::mm":
            calls[(ev["name"], json.dumps(ev["args"]["Input Dims"]))] += 1
    rows = [r for r in query(store, run_id, EXAMPLES["ops_by_shape"]) if r["name"] == "aten::mm"]
    assert len(rows) == len(calls) == 2 and all(r["calls"] == 1 for r in rows)  # two batch sizes, one call each
    assert sorted(json.loads(r["input_shapes"]) for r in rows) == sorted(json.loads(k[1]) for k in calls)
