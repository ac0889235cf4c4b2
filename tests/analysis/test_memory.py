"""The memory report against the file: real torch.profiler(profile_memory=True) captures on CPU, read back with
plain json + decimal and replayed independently (peak, what is live at it by owner, leaks, counts, churn)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.run import Run

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from explorer.analysis.memory import ALLOCATION_PRIMITIVES, BEFORE  # noqa: E402
from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402
from explorer.views.memory import compute_run_memory  # noqa: E402

ACTIVE_STEPS = 3
LEAK_ROWS, LEAK_COLS = 64, 256  # the tensor the leaking loop keeps per step (float32)


def train_profile(path: Path, batch: int, leak: bool) -> None:
    """A small MLP trained for a few steps with a wide hidden layer (its activations, not its weights, are what
    the profile allocates), optionally keeping one tensor per step alive in a list (a leak)."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(LEAK_COLS, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    x = torch.randn(batch * 16, LEAK_COLS)
    leak_src = torch.randn(LEAK_ROWS, LEAK_COLS)
    kept: list[Any] = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True,
                 schedule=schedule(wait=1, warmup=1, active=ACTIVE_STEPS),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(2 + ACTIVE_STEPS):
            model(x).sum().backward()
            if leak:
                kept.append(torch.cumsum(leak_src, 0))
            prof.step()


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("memory")
    out = {"leak8": d / "leak8.json", "b8": d / "b8.json", "b16": d / "b16.json"}
    train_profile(out["leak8"], 8, leak=True)
    train_profile(out["b8"], 8, leak=False)
    train_profile(out["b16"], 16, leak=False)
    return out


def read_events(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """([memory] events in time order (file order on ties), the X events) with times as exact Decimal µs."""
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    mem = [e for e in events if e.get("name") == "[memory]"]
    mem = [e for _, e in sorted(enumerate(mem), key=lambda p: (Decimal(p[1]["ts"]), p[0]))]
    return mem, [e for e in events if e.get("ph") == "X"]


def replay_peak(mem: list[dict[str, Any]]) -> tuple[int, dict[int, dict[str, Any]]]:
    """The position of the first event at the maximum Total Allocated, and the allocations live there
    (address -> its allocating event), replaying allocations and frees by address."""
    totals = [e["args"]["Total Allocated"] for e in mem]
    at = totals.index(max(totals))
    live: dict[int, dict[str, Any]] = {}
    for e in mem[:at + 1]:
        if e["args"]["Bytes"] > 0:
            live[e["args"]["Addr"]] = e
        else:
            live.pop(e["args"]["Addr"], None)
    return at, live


def owner_of(e: dict[str, Any], xs: list[dict[str, Any]]) -> str:
    """The innermost op (cpu_op) on the event's thread that encloses it and is not an allocation primitive."""
    t = Decimal(e["ts"])
    enclosing = [x for x in xs if x.get("cat") == "cpu_op" and x["tid"] == e["tid"]
                 and Decimal(x["ts"]) <= t < Decimal(x["ts"]) + Decimal(x["dur"])]
    enclosing.sort(key=lambda x: (Decimal(x["ts"]), -Decimal(x["dur"])))
    named = [x["name"] for x in enclosing if x["name"] not in ALLOCATION_PRIMITIVES]
    return named[-1] if named else (enclosing[-1]["name"] if enclosing else "(no op)")


def report(store: RunStore, path: Path) -> tuple[dict[str, Any], int]:
    rec = ingest_paths(store, [path])
    data = compute_run_memory(store, rec.id)
    assert data["report"] is not None, data["reason"]
    return dict(data["report"]), rec.summary.start_ns


@pytest.mark.parametrize("name", ["leak8", "b8", "b16"])
def test_peak_is_the_maximum_of_total_allocated_and_its_owners_are_what_is_live(
        store: RunStore, profiles: dict[str, Path], name: str) -> None:
    rep, origin = report(store, profiles[name])
    mem, xs = read_events(profiles[name])
    at, live = replay_peak(mem)
    [peak] = rep["peaks"]
    assert peak["device"] == "CPU"
    assert peak["bytes"] == max(e["args"]["Total Allocated"] for e in mem) == mem[at]["args"]["Total Allocated"]
    assert sum(r["bytes"] for r in peak["by_owner"]) == peak["bytes"]  # the breakdown sums to the peak
    assert sum(r["bytes"] for r in peak["by_size"]) == sum(r["bytes"] for r in peak["by_module"]) == peak["bytes"]
    base = int(json.loads(profiles[name].read_text()).get("baseTimeNanoseconds", 0))
    assert peak["ts_ns"] + origin == base + int(Decimal(mem[at]["ts"]) * 1000)
    want: Counter[str] = Counter()
    for e in live.values():
        want[owner_of(e, xs)] += e["args"]["Bytes"]
    before = peak["bytes"] - sum(want.values())
    got = {r["owner"]: r["bytes"] for r in peak["by_owner"]}
    assert got == {**dict(want), **({BEFORE: before} if before else {})}
    assert rep["allocations"] == sum(1 for e in mem if e["args"]["Bytes"] > 0)
    assert rep["frees"] == sum(1 for e in mem if e["args"]["Bytes"] < 0)
    assert rep["events"] == len(mem)


def test_activations_own_the_peak(store: RunStore, profiles: dict[str, Path]) -> None:
    """The profile allocates no weights: what is live at the peak was made by the step's ops, but for what the
    allocator already held when the first event was recorded (its Total Allocated less its own Bytes), and the
    biggest owners are the forward/backward ops of the wide layers."""
    rep, _ = report(store, profiles["b16"])
    [peak] = rep["peaks"]
    mem, _ = read_events(profiles["b16"])
    held = mem[0]["args"]["Total Allocated"] - mem[0]["args"]["Bytes"]
    assert rep["unmatched_frees"] == 0
    assert {r["owner"]: r["bytes"] for r in peak["by_owner"]}.get(BEFORE, 0) == held < peak["bytes"] // 10
    assert peak["by_owner"][0]["owner"] in {"aten::addmm", "aten::mm", "aten::clamp_min", "aten::threshold_backward"}
    assert any(r["owner"].startswith("nn.Module: ") for r in peak["by_module"])  # with_stack frames name modules


def test_the_leak_is_found_and_named_by_its_op(store: RunStore, profiles: dict[str, Path]) -> None:
    rep, _ = report(store, profiles["leak8"])
    leak = rep["leaks"][0]
    assert (leak["owner"], leak["steps"], leak["count"]) == ("aten::cumsum", ACTIVE_STEPS, ACTIVE_STEPS)
    assert leak["bytes"] == ACTIVE_STEPS * LEAK_ROWS * LEAK_COLS * 4
    assert all(r["steps"] <= 1 for r in rep["leaks"][1:])  # nothing else is left behind step after step
    clean, _ = report(store, profiles["b8"])
    assert all(r["steps"] <= 1 for r in clean["leaks"])
    mem, _ = read_events(profiles["leak8"])
    open_: dict[int, int] = {}
    for e in mem:
        if e["args"]["Bytes"] > 0:
            open_[e["args"]["Addr"]] = e["args"]["Bytes"]
        else:
            open_.pop(e["args"]["Addr"], None)
    assert sum(r["bytes"] for r in rep["leaks"]) == sum(open_.values())  # live at the end, independently


def test_churn_per_step_counts_the_events_inside_each_step(store: RunStore, profiles: dict[str, Path]) -> None:
    rep, _ = report(store, profiles["leak8"])
    mem, xs = read_events(profiles["leak8"])
    steps = sorted((x for x in xs if x["name"].startswith("ProfilerStep#")), key=lambda x: Decimal(x["ts"]))
    assert [r["step"] for r in rep["churn"]] == [s["name"] for s in steps] and len(steps) == ACTIVE_STEPS
    for row, s in zip(rep["churn"], steps, strict=True):
        lo, hi = Decimal(s["ts"]), Decimal(s["ts"]) + Decimal(s["dur"])
        inside = [e for e in mem if lo <= Decimal(e["ts"]) < hi]
        assert row["allocations"] == sum(1 for e in inside if e["args"]["Bytes"] > 0)
        assert row["allocated_bytes"] == sum(e["args"]["Bytes"] for e in inside if e["args"]["Bytes"] > 0)
        assert row["frees"] == sum(1 for e in inside if e["args"]["Bytes"] < 0)
        assert row["peak_bytes"] == max(e["args"]["Total Allocated"] for e in inside)


def test_timeline_stacks_sum_to_total_allocated(store: RunStore, profiles: dict[str, Path]) -> None:
    rep, _ = report(store, profiles["b8"])
    [tl] = rep["timelines"]
    mem, _ = read_events(profiles["b8"])
    assert tl["allocated"] == [e["args"]["Total Allocated"] for e in mem]  # (few events: none thinned out)
    for k in range(len(tl["ts_ns"])):
        assert sum(series[k] for series in tl["stacked"]) == tl["allocated"][k]


def test_batch_16_against_8_grows_the_activation_owners(store: RunStore, profiles: dict[str, Path]) -> None:
    small, _ = report(store, profiles["b8"])
    big, _ = report(store, profiles["b16"])
    assert big["peaks"][0]["bytes"] > small["peaks"][0]["bytes"]
    s = {r["owner"]: r["bytes"] for r in small["peaks"][0]["by_owner"]}
    b = {r["owner"]: r["bytes"] for r in big["peaks"][0]["by_owner"]}
    assert b["aten::clamp_min"] == 2 * s["aten::clamp_min"]  # a ReLU output is batch x width: twice the batch


def test_shared_cpu_trace(store: RunStore, shared_traces: Path) -> None:
    """A public torch.profiler capture (CPU, profile_memory): counts and the peak equal a plain reading."""
    path = shared_traces / "dtu_mlops" / "trace.json"
    rep, _ = report(store, path)
    mem, _ = read_events(path)
    by_device: dict[str, int] = defaultdict(int)
    for e in mem:
        by_device["CPU"] = max(by_device["CPU"], e["args"]["Total Allocated"])
    assert {p["device"]: p["bytes"] for p in rep["peaks"]} == dict(by_device)
    assert rep["allocations"] == sum(1 for e in mem if e["args"]["Bytes"] > 0)
    assert all(sum(r["bytes"] for r in p["by_owner"]) == p["bytes"] for p in rep["peaks"])


def test_two_runs_compared_by_owner_and_gated(store: RunStore, profiles: dict[str, Path]) -> None:
    """Batch 16 against batch 8: the peak's growth by owner equals the two files' own replays, and the gate's
    peak_memory metric is each file's maximum of Total Allocated."""
    from explorer.views.check import compute_run_check

    ids = {k: ingest_paths(store, [profiles[k]]).id for k in ("b8", "b16")}
    [delta] = compute_run_memory(store, ids["b16"], baseline=ids["b8"])["compare"]
    want: dict[str, Counter[str]] = {}
    for k in ("b8", "b16"):
        mem, xs = read_events(profiles[k])
        _, live = replay_peak(mem)
        want[k] = Counter()
        for e in live.values():
            want[k][owner_of(e, xs)] += e["args"]["Bytes"]
    peaks = {k: max(e["args"]["Total Allocated"] for e in read_events(profiles[k])[0]) for k in ("b8", "b16")}
    assert (delta["bytes"], delta["baseline_bytes"], delta["delta"]) == (peaks["b16"], peaks["b8"],
                                                                        peaks["b16"] - peaks["b8"])
    got = {r["owner"]: r["delta"] for r in delta["by_owner"] if r["owner"] != BEFORE}
    assert got == {o: want["b16"][o] - want["b8"][o] for o in set(want["b16"]) | set(want["b8"])}
    result = compute_run_check(store, ids["b8"], ids["b16"], ["peak_memory"], "5%")
    [row] = result["rows"]
    assert (row["baseline_ns"], row["candidate_ns"], row["unit"]) == (peaks["b8"], peaks["b16"], "bytes")
    assert row["verdict"] == "regression" and not result["passed"]


def test_notebook_memory_is_the_api_twin(tmp_path: Path, profiles: dict[str, Path]) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from explorer.config import Settings
    from explorer.notebook import open_run

    run = open_run(profiles["leak8"], data_dir=tmp_path / "data")
    ours = run.memory()
    assert ours["report"] is not None and ours["report"]["leaks"][0]["owner"] == "aten::cumsum"
    with TestClient(create_app(Settings(data_dir=tmp_path / "data")), base_url="http://127.0.0.1") as client:
        resp = client.get(f"/api/runs/{run.id}/memory")
        assert resp.status_code == 200 and resp.json() == json.loads(json.dumps(ours))
        page = client.get(f"/runs/{run.id}/memory")
        assert page.status_code == 200 and "aten::cumsum" in page.text
        assert client.get(f"/api/runs/{run.id}/memory?baseline=nope").status_code == 404


def test_the_offline_report_has_the_peak(store: RunStore, profiles: dict[str, Path]) -> None:
    from explorer.report.html import build_report, render_report

    rec = ingest_paths(store, [profiles["leak8"]])
    html = render_report(build_report(Run.of(store, rec.id)))
    mem, _ = read_events(profiles["leak8"])
    peak = max(e["args"]["Total Allocated"] for e in mem)
    assert 'id="report-memory"' in html and f'title="{peak:,} bytes"' in html and "aten::cumsum" in html


def test_events_without_addresses_say_so(store: RunStore, tmp_path: Path) -> None:
    """2021-era Kineto [memory] events have Bytes but no Addr: nothing can be paired, and the page says why."""
    events = [{"ph": "X", "cat": "Operator", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]
    events += [{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 11 + i,
                "args": {"Device Type": 0, "Device Id": -1, "Bytes": 64 * (1 if i % 2 == 0 else -1)}} for i in range(4)]
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"traceEvents": events}))
    data = compute_run_memory(store, ingest_paths(store, [path]).id)
    assert data["report"] is None and "4 [memory] events carry no Addr" in data["reason"]
