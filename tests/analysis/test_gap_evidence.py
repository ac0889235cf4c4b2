"""Gaps explained by host activity, against plain-python readings of the raw trace (Decimal µs -> ns):
a constructed trace with one gap per cause, the largest gap of real GPU traces, and the gap links."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from explorer.analysis.gap_evidence import timeline_window
from explorer.analysis.intervals import covered_between, overlapping, union_segments
from explorer.model.shapes import Gap
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
FRAMEWORK_CATS = {"cpu_op", "user_annotation", "python_function", "operator"}
HOST_CATS = FRAMEWORK_CATS | {"cuda_runtime", "cuda_driver", "cuda_sync", "runtime"}
Key = tuple[str, Any, Any]


def ns(us: Any) -> int:
    return int(Decimal(str(us)) * 1000)


def union_length(intervals: list[tuple[int, int]]) -> int:
    total, cur_a, cur_b = 0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            total += 0 if cur_b is None or cur_a is None else cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    return total + (0 if cur_b is None or cur_a is None else cur_b - cur_a)


# ---- a constructed trace: one gap per cause --------------------------------------------------------

def host(name: str, cat: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def execution(name: str, ts: float, dur: float, corr: int, cat: str = "kernel") -> list[dict[str, Any]]:
    """A device execution on stream 7 and its ac2g flow from the launch call with the same correlation."""
    return [{"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
             "args": {"correlation": corr, "stream": 7, "device": 0}},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": ts, "bp": "e"}]


def launch(name: str, ts: float, dur: float, corr: int, cat: str = "cuda_runtime") -> list[dict[str, Any]]:
    return [host(name, cat, ts, dur, correlation=corr),
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": ts}]


def cause_events() -> list[dict[str, Any]]:
    """Five gaps on one stream (µs): host busy in the DataLoader (a 0.7 µs sync inside), a long
    cudaStreamSynchronize, nothing on the host, a blocking cudaMemcpy, a launch call that takes long."""
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        *launch("cudaLaunchKernel", 0, 2, 1), *execution("k0", 3, 7, 1),
        # gap 1: 10 -> 1010, host busy
        host(LOADER, "user_annotation", 12, 988), host("aten::to", "cpu_op", 100, 100),
        host("cudaStreamSynchronize", "cuda_runtime", 500, 0.7),
        *launch("cudaLaunchKernel", 1002, 3, 2), *execution("k1", 1010, 10, 2),
        # gap 2: 1020 -> 1520, synchronize
        host("cudaStreamSynchronize", "cuda_runtime", 1030, 470),
        *launch("cudaLaunchKernel", 1505, 3, 3), *execution("k2", 1520, 10, 3),
        # gap 3: 1530 -> 2530, idle host
        *launch("cudaLaunchKernel", 2520, 3, 4), *execution("k3", 2530, 10, 4),
        # gap 4: 2540 -> 3040, data transfer
        *launch("cudaMemcpy", 2545, 490, 5), *execution("Memcpy HtoD (Pageable -> Device)", 3040, 10, 5, "gpu_memcpy"),
        # gap 5: 3050 -> 3350, launch latency
        *launch("cudaLaunchKernel", 3055, 5, 6), *execution("k5", 3350, 10, 6),
        host("<script>alert(1)</script>", "cpu_op", 3100, 1),
    ]
    return ev


EXPECTED = [  # (gap start µs, cause, the top activity's name)
    (10, "host busy", LOADER),
    (1020, "synchronize", "cudaStreamSynchronize"),
    (1530, "idle host", "cudaLaunchKernel"),
    (2540, "data transfer", "cudaMemcpy"),
    (3050, "launch latency", "cudaLaunchKernel"),
]


@pytest.fixture(scope="module")
def causes_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunStore, str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("gap-causes")
    events = cause_events()
    path = tmp / "causes.json"
    path.write_text(json.dumps({"traceEvents": events}))
    store = RunStore(tmp / "data")
    return store, ingest_paths(store, [path]).id, events


def independent_gaps(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Gaps (absolute ns) between the union of device executions per device (Kineto: the pid, all its
    streams together), largest first."""
    per_stream: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in DEVICE_CATS:
            per_stream[e["pid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    gaps = []
    for intervals in per_stream.values():
        end = None
        for a, b in sorted(intervals):
            if end is not None and a > end:
                gaps.append((end, a))
            end = b if end is None else max(end, b)
    return sorted(gaps, key=lambda g: -(g[1] - g[0]))


def coverage(events: list[dict[str, Any]], gs: int, ge: int) -> dict[Key, int]:
    """Per (name, pid, tid): the union of the host slices clipped to [gs, ge)."""
    clipped: dict[Key, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in HOST_CATS:
            a, b = max(ns(e["ts"]), gs), min(ns(e["ts"]) + ns(e["dur"]), ge)
            if a < b:
                clipped[e["name"], e["pid"], e["tid"]].append((a, b))
    return {k: union_length(v) for k, v in clipped.items()}


def gap_rows(store: RunStore, run_id: str) -> list[Gap]:
    return Run.of(store, run_id).breakdown()["gaps"]["largest"]


def test_each_cause_from_the_host_evidence(causes_run: tuple[RunStore, str, list[dict[str, Any]]]) -> None:
    store, run_id, events = causes_run
    rows = sorted(gap_rows(store, run_id), key=lambda g: g["start"])
    origin = min(ns(e["ts"]) for e in events if e.get("ph") == "X")
    assert [(g["start"] + origin, g["cause"]) for g in rows] == [(ns(s), c) for s, c, _ in EXPECTED]
    for g, (_, cause, top) in zip(rows, EXPECTED, strict=True):
        gs, ge = g["start"] + origin, g["end"] + origin
        cover = coverage(events, gs, ge)
        assert {(a["name"], a["covered_ns"]) for a in g["host_activity"]} == {(k[0], v) for k, v in cover.items()}
        assert g["top_activity"] is not None and g["top_activity"]["name"] == top
        share = {"synchronize": "cudaStreamSynchronize", "data transfer": "cudaMemcpy"}.get(cause, top)
        covered = sum(v for k, v in cover.items() if k[0] == share)
        if cause == "launch latency":  # from the launch call's start to the execution
            covered = ge - ns(3055)
        if cause == "idle host":
            covered = sum(cover.values())
        assert re.search(rf"[ (]{covered * 100 // (ge - gs)} %", g["cause_detail"]), g["cause_detail"]
    loader = rows[0]
    assert loader["cause_detail"] == f"host busy: {LOADER} (98 %)"  # 988 of 1000 µs
    assert ("cudaStreamSynchronize", 700) in {(a["name"], a["covered_ns"]) for a in loader["host_activity"]}


def test_gap_table_shows_cause_detail_and_escapes_names(causes_run: tuple[RunStore, str, list[dict[str, Any]]]) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from explorer.config import Settings

    store, run_id, _ = causes_run
    with TestClient(create_app(Settings(data_dir=store.data_dir))) as client:
        api = client.get(f"/api/runs/{run_id}/breakdown").json()
        html = client.get(f"/runs/{run_id}").text
    assert api == Run.of(store, run_id).breakdown()
    assert f"host busy: {LOADER} (98 %)" in html
    first = api["gaps"]["largest"][0]
    assert f'/runs/{run_id}/timeline?{first["timeline"]["query"]}'.replace("&", "&amp;") in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_overlapping_and_covered_between_equal_a_scan() -> None:
    rng = np.random.default_rng(7)
    starts = np.sort(rng.integers(0, 10_000, 500))
    ends = starts + rng.integers(0, 2_000, 500)
    for lo, hi in [(0, 1), (5_000, 5_001), (100, 9_000), (11_999, 20_000), (-5, 0)] + [
            tuple(sorted(rng.integers(0, 12_000, 2).tolist())) for _ in range(50)]:
        got = overlapping(starts, np.maximum.accumulate(ends), ends, lo, hi).tolist()
        assert got == [i for i in range(500) if starts[i] < hi and ends[i] > lo], (lo, hi)

    a, b = union_segments(starts, ends)
    windows = [(0, 1), (100, 9_000), (3_000, 3_000), (11_999, 20_000)]
    got = covered_between(a, b, np.asarray([w[0] for w in windows]), np.asarray([w[1] for w in windows])).tolist()
    assert got == [len({t for s, e in zip(starts.tolist(), ends.tolist(), strict=True) for t in range(max(s, lo), min(e, hi))})
                   for lo, hi in windows]


# ---- gap links ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("start, end, span, window", [
    (1000, 2000, 10_000, (900, 2100)),  # 10 % of the gap on each side
    (50, 1050, 10_000, (0, 1150)),  # clamped at the run start, never negative
    (9000, 9990, 10_000, (8901, 10_000)),  # clamped at the run end
    (0, 10_000, 10_000, (0, 10_000)),
    (5, 9, 100, (5, 9)),  # under 10 ns the margin rounds down to nothing
])
def test_timeline_window(start: int, end: int, span: int, window: tuple[int, int]) -> None:
    w = timeline_window(start, end, span)
    assert (w["start"], w["end"], w["hl_start"], w["hl_end"]) == (*window, start, end)
    assert w["query"] == f"start={window[0]}&end={window[1]}&hl_start={start}&hl_end={end}"


def assert_links(rows: list[Gap], span: int) -> None:
    for g in rows:
        w, margin = g["timeline"], g["dur_ns"] // 10
        assert (w["hl_start"], w["hl_end"]) == (g["start"], g["end"])
        assert (w["start"], w["end"]) == (max(g["start"] - margin, 0), min(g["end"] + margin, span))
        assert 0 <= w["start"] <= w["hl_start"] < w["hl_end"] <= w["end"] <= span


# ---- real GPU traces: the largest gap's top host activity --------------------------------------------

HTA = "HolisticTraceAnalysis/tests/data/"
REAL = [HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        HTA + "critical_path/cuda_event_sync/event_sync_trace.json.gz",
        HTA + "nccl_parser_config/nccl_data.json.gz",
        HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        HTA + "with_gpu_user_annotation/step_based_trace_2543932.json.gz",
        HTA + "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"]


def read_events(path: Path) -> list[dict[str, Any]]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(raw)
    return list(doc["traceEvents"] if isinstance(doc, dict) else doc)


def independent_top(events: list[dict[str, Any]], gs: int, ge: int) -> tuple[str, int]:
    """The rule, read off the raw events: the deepest framework slice (most enclosing framework slices on
    its thread) covering at least half the gap; else the largest coverer."""
    cover = coverage(events, gs, ge)
    frames = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in FRAMEWORK_CATS]

    def depth(key: Key) -> int:
        mine = [e for e in frames if (e["name"], e["pid"], e["tid"]) == key
                and ns(e["ts"]) < ge and ns(e["ts"]) + ns(e["dur"]) > gs]
        return min(sum(1 for o in frames if o is not e and (o["pid"], o["tid"]) == (e["pid"], e["tid"])
                       and ns(o["ts"]) <= ns(e["ts"]) and ns(o["ts"]) + ns(o["dur"]) >= ns(e["ts"]) + ns(e["dur"]))
                   for e in mine)

    framework_keys = {(e["name"], e["pid"], e["tid"]) for e in frames}
    most = [k for k, v in cover.items() if k in framework_keys and 2 * v >= ge - gs]
    if most:
        best = max(most, key=lambda k: (depth(k), cover[k]))
        return best[0], cover[best]
    best = max(cover, key=lambda k: cover[k])
    return best[0], cover[best]


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> dict[str, tuple[RunStore, str]]:
    store = RunStore(tmp_path_factory.mktemp("gap-real") / "data")
    return {rel: (store, ingest_paths(store, [shared_traces / rel]).id) for rel in REAL}


@pytest.mark.shared
@pytest.mark.parametrize("rel", REAL)
def test_largest_gap_top_host_activity_matches_the_file(rel: str, real_runs: dict[str, tuple[RunStore, str]],
                                                        shared_traces: Path) -> None:
    events = read_events(shared_traces / rel)
    store, run_id = real_runs[rel]
    rows = gap_rows(store, run_id)
    gs, ge = independent_gaps(events)[0]
    largest = rows[0]
    assert largest["dur_ns"] == ge - gs
    cover = coverage(events, gs, ge)
    assert [a["covered_ns"] for a in largest["host_activity"]] == sorted(cover.values(), reverse=True)[:5]
    if cover:
        name, covered = independent_top(events, gs, ge)
        assert largest["top_activity"] is not None
        assert (largest["top_activity"]["name"], largest["top_activity"]["covered_ns"]) == (name, covered)
    assert_links(rows, store.get(run_id).summary.span_ns)
