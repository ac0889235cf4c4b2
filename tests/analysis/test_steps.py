"""The step view against sweep-line readings of the raw trace (Decimal µs -> ns): a GPU-like Kineto trace
with kernels, NCCL overlapping compute on another stream, memcpy and memset per step; a real
torch.profiler CPU trace with a schedule (ProfilerStep#N); real GPU traces with ProfilerStep."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from explorer.analysis.steps import STEP_PARTS
from explorer.errors import BadRequest
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from tests.analysis.test_gap_evidence import ns, read_events
from tests.helpers.kernel_trace import GEMM_KERNEL, NCCL_KERNEL, kernel_events

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}


def part(e: dict[str, Any]) -> str:
    name, cat = e["name"].lower(), str(e["cat"]).lower()
    if "memcpy" in cat:
        return "memcpy"
    if "memset" in cat:
        return "memset"
    if "nccl" in name or "rccl" in name:
        return "communication"
    return "compute" if cat == "kernel" else "other"


def sweep(executions: list[dict[str, Any]], lo: int, hi: int) -> dict[str, int]:
    """Per part, the ns of [lo, hi) where that part is the highest-priority one running (a sweep line
    over start/end events), plus idle."""
    marks: list[tuple[int, int, str]] = []
    for e in executions:
        a, b = max(ns(e["ts"]), lo), min(ns(e["ts"]) + ns(e["dur"]), hi)
        if a < b:
            marks += [(a, 1, part(e)), (b, -1, part(e))]
    marks.sort()
    running: dict[str, int] = defaultdict(int)
    out = dict.fromkeys((*STEP_PARTS, "idle"), 0)
    at = lo
    for pos, delta, p in marks:
        active = [q for q in STEP_PARTS if running[q] > 0]
        out[active[0] if active else "idle"] += pos - at
        running[p] += delta
        at = pos
    out["idle"] += hi - at
    return out


def expected_steps(events: list[dict[str, Any]], prefix: str = "ProfilerStep#") -> list[dict[str, Any]]:
    steps = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                    and e["name"].startswith(prefix)), key=lambda e: (ns(e["ts"]), ns(e["dur"])))
    execs = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in DEVICE_CATS]
    return [{"name": s["name"], "ts": ns(s["ts"]), "dur_ns": ns(s["dur"]),
             **sweep(execs, ns(s["ts"]), ns(s["ts"]) + ns(s["dur"]))} for s in steps]


def assert_steps_match(store: RunStore, run_id: str, events: list[dict[str, Any]]) -> None:
    got = Run.of(store, run_id).steps()
    want = expected_steps(events)
    assert got["count"] == len(want) > 0
    first = want[0]["ts"] - got["steps"][0]["start"]
    for row, exp in zip(got["steps"], want, strict=True):
        assert (row["name"], row["start"] + first, row["dur_ns"]) == (exp["name"], exp["ts"], exp["dur_ns"])
        assert {p: row[f"{p}_ns"] for p in (*STEP_PARTS, "idle")} == {p: exp[p] for p in (*STEP_PARTS, "idle")}
        assert row["busy_ns"] == exp["dur_ns"] - exp["idle"]
        assert row["busy_pct"] == pytest.approx(100 * row["busy_ns"] / row["dur_ns"])
        w = row["timeline"]
        assert (w["hl_start"], w["hl_end"]) == (row["start"], row["end"]) and 0 <= w["start"] <= w["hl_start"]
    slowest = max(range(len(want)), key=lambda i: (want[i]["dur_ns"], -i))
    assert got["slowest"] == slowest


def gpu_like_events() -> list[dict[str, Any]]:
    """tests/helpers/kernel_trace.py's three steps, plus in step 2 an NCCL kernel on stream 8 that half overlaps
    the GEMM, and a memcpy on stream 9 that overlaps the NCCL kernel."""
    events = kernel_events()
    gemm = [e for e in events if e.get("ph") == "X" and e["name"] == GEMM_KERNEL][1]
    t = gemm["ts"] + gemm["dur"] / 2
    events += [{"ph": "X", "cat": "kernel", "name": NCCL_KERNEL, "pid": 0, "tid": 8, "ts": t, "dur": 250.5,
                "args": {"stream": 8, "device": 0}},
               {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 9,
                "ts": t + 200, "dur": 100.25, "args": {"stream": 9, "device": 0}}]
    return events


@pytest.fixture(scope="module")
def step_store(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    return RunStore(tmp_path_factory.mktemp("steps") / "data")


def ingest_events(store: RunStore, path: Path, events: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"traceEvents": events}))
    return ingest_paths(store, [path]).id


def test_steps_of_a_gpu_like_trace(step_store: RunStore, tmp_path: Path) -> None:
    events = gpu_like_events()
    run_id = ingest_events(step_store, tmp_path / "gpu.json", events)
    assert_steps_match(step_store, run_id, events)
    rows = Run.of(step_store, run_id).steps()["steps"]
    assert all(r[f"{p}_ns"] > 0 for r in rows for p in ("compute", "communication", "memcpy", "idle"))
    assert rows[0]["memset_ns"] > 0  # in step 2 the extra NCCL kernel and copy run over the memset
    assert all(sum(r[f"{p}_ns"] for p in (*STEP_PARTS, "idle")) == r["dur_ns"] for r in rows)


def test_steps_by_another_annotation_and_bad_ones(step_store: RunStore, tmp_path: Path) -> None:
    events = gpu_like_events() + [{"ph": "X", "cat": "user_annotation", "name": f"train_iter {i}", "pid": 1, "tid": 1,
                                   "ts": 2000 * i + 100, "dur": 500, "args": {}} for i in range(2)]
    run_id = ingest_events(step_store, tmp_path / "iters.json", events)
    got = Run.of(step_store, run_id).steps("train_iter")
    assert [r["name"] for r in got["steps"]] == ["train_iter 0", "train_iter 1"]
    assert [r["dur_ns"] for r in got["steps"]] == [500_000, 500_000] and got["slowest"] == 0
    none = Run.of(step_store, run_id).steps("no such step")
    assert (none["count"], none["steps"], none["slowest"]) == (0, [], None)
    for bad in ("", "   ", "x" * 201):
        with pytest.raises(BadRequest):
            Run.of(step_store, run_id).steps(bad)


@pytest.mark.slow
def test_steps_of_a_torch_profiler_schedule(step_store: RunStore, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from torch.profiler import schedule

    from tests.store.test_queries_vs_torch import profile_to_file, rmsnorm_naive

    path = tmp_path / "schedule.json"
    profile_to_file(rmsnorm_naive, {"schedule": schedule(wait=1, warmup=1, active=3)}, 5, path)
    events = read_events(path)
    run_id = ingest_paths(step_store, [path]).id
    assert_steps_match(step_store, run_id, events)
    assert [r["name"] for r in Run.of(step_store, run_id).steps()["steps"]] == [
        "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]


HTA = "HolisticTraceAnalysis/tests/data/"
REAL_STEPS = [HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
              HTA + "nccl_parser_config/nccl_data.json.gz"]


@pytest.mark.shared
@pytest.mark.parametrize("rel", REAL_STEPS)
def test_steps_of_real_gpu_traces(rel: str, step_store: RunStore, shared_traces: Path) -> None:
    run_id = ingest_paths(step_store, [shared_traces / rel]).id
    assert_steps_match(step_store, run_id, read_events(shared_traces / rel))
