"""Device time in the default (operators) op view: kernels launched through the driver or runtime with no op
around them (only with_stack Python frames, or nothing) are not dropped. Each number is checked against the
trace file read here with json + decimal: a kernel belongs to the runtime call with its correlation id; its
row is the innermost enclosing op that is not a Python frame, else the innermost frame, else the call."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from explorer.cli import main
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.queries import default_op_sort, load_ops
from explorer.store.runs import RunStore
from explorer.views.ops import OpsQuery, build_ops_page, compute_run_ops
from explorer.views.overview import overview_top_ops

OP_CATS = {"cpu_op", "user_annotation", "python_function"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_FRAME = "flashinfer/jit.py(40): launch"


# ---- the constructed trace: a flashinfer-like capture ------------------------------------------------

class Trace:
    """Kineto-shaped events on one host thread (pid 1, tid 1) and one stream (pid 0, tid 7)."""

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        ]
        self.corr = 0

    def host(self, cat: str, name: str, ts: str, dur: str, ext: int | None = None) -> None:
        args = {} if ext is None else {"External id": ext}
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": args})

    def launch(self, cat: str, name: str, ts: str, kernel: str, k_ts: str, k_dur: str, ext: int | None = None) -> None:
        """A runtime/driver call at `ts` (10 µs long) and the kernel it launched, linked by correlation and ac2g."""
        self.corr += 1
        args: dict[str, Any] = {"correlation": self.corr, **({} if ext is None else {"External id": ext})}
        self.events += [
            {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": "10.000", "args": args},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": k_ts, "dur": k_dur,
             "args": {**args, "device": 0, "stream": 7}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": self.corr, "pid": 1, "tid": 1, "ts": ts},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": self.corr, "pid": 0, "tid": 7, "ts": k_ts, "bp": "e"},
        ]

    def write(self, path: Path) -> Path:
        # ts/dur as JSON numbers with 3 decimals (µs), as Kineto writes them
        text = json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake B200"}],
                           "distributedInfo": {"rank": self.rank, "world_size": 2},
                           "traceEvents": self.events})
        for e in self.events:
            for key in ("ts", "dur"):
                if isinstance(e.get(key), str):
                    text = text.replace(f'"{key}": "{e[key]}"', f'"{key}": {e[key]}', 1)
        path.write_text(text)
        return path


def flashinfer_like(rank: int = 0) -> Trace:
    """Inside ProfilerStep#1, 1: frames only around a cuLaunchKernelEx (most of the device time); 2: a cpu_op
    further up the stack (rolls up to it) through the same launch frame; after the step, 3: a bare cudaLaunchKernel, no frame, no op; an aten op and
    an all-reduce as usual; a kernel no call in the trace launched."""
    t = Trace(rank)
    t.host("user_annotation", "ProfilerStep#1", "990.000", "560.000", ext=1)  # a region, not a launching op
    t.host("python_function", "flashinfer/fused_moe.py(120): forward", "1000.000", "200.000")
    t.host("python_function", LAUNCH_FRAME, "1010.000", "150.000")
    t.launch("cuda_driver", "cuLaunchKernelEx", "1020.000", "moe_gemm_kernel", "1100.000", "500.250")
    t.host("cpu_op", "vllm::unified_attention", "1300.000", "200.000", ext=7)
    t.host("python_function", "flashinfer/decode.py(88): run", "1305.000", "180.000")
    t.host("python_function", LAUNCH_FRAME, "1310.000", "150.000")
    t.launch("cuda_driver", "cuLaunchKernelEx", "1320.000", "BatchDecodeKernel", "1700.000", "120.125", ext=7)
    t.launch("cuda_runtime", "cudaLaunchKernel", "1600.000", "bare_kernel", "1900.000", "30.500")
    t.host("cpu_op", "aten::mm", "1650.000", "50.000", ext=8)
    t.launch("cuda_runtime", "cudaLaunchKernel", "1660.000", "gemm_kernel", "2000.000", "80.001", ext=8)
    t.host("cpu_op", "nccl:all_reduce", "1750.000", "50.000", ext=9)
    t.launch("cuda_runtime", "cudaLaunchKernel", "1760.000", "ncclDevKernel_AllReduce", "2100.000", "100.000", ext=9)
    t.events.append({"ph": "X", "cat": "kernel", "name": "orphan_kernel", "pid": 0, "tid": 7, "ts": 2300.0,
                     "dur": 7.25, "args": {"correlation": 999, "device": 0, "stream": 7}})
    return t


# ---- the reference reader: plain json + decimal, no explorer ----------------------------------------

def ns(us: Any) -> int:
    return int(Decimal(us) * 1000)


def read_events(path: Path) -> list[dict[str, Any]]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    events = [e for e in json.loads(raw, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    for e in events:
        e["t0"] = ns(e["ts"])
        e["t1"] = e["t0"] + ns(e["dur"])
    return events


def launches(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(runtime call, device execution) pairs linked by correlation id."""
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") in RUNTIME_CATS and "correlation" in e["args"]}
    return [(calls[e["args"]["correlation"]], e) for e in events
            if e.get("cat") in DEVICE_CATS and e["args"].get("correlation") in calls]


def launch_row(events: list[dict[str, Any]], call: dict[str, Any]) -> tuple[str, str]:
    """(row name, kind) whose self device time a launch is: the innermost enclosing op; when that is a Python
    frame, the nearest cpu_op above it (not a user_annotation range such as ProfilerStep#N), else the frame;
    with nothing around the call, the call."""
    above = sorted((e for e in events if e.get("cat") in OP_CATS and (e["pid"], e["tid"]) == (call["pid"], call["tid"])
                    and e["t0"] <= call["t0"] and call["t1"] <= e["t1"]), key=lambda e: (e["t0"], -e["t1"]))
    if not above:
        return call["name"], "runtime"
    if above[-1]["cat"] != "python_function":
        return above[-1]["name"], "operator"
    ops = [e for e in above if e["cat"] == "cpu_op"]
    return (ops[-1]["name"], "operator") if ops else (above[-1]["name"], "python")


def reference_self_device(events: list[dict[str, Any]]) -> dict[str, int]:
    rows: dict[str, int] = defaultdict(int)
    for call, execution in launches(events):
        rows[launch_row(events, call)[0]] += execution["t1"] - execution["t0"]
    return dict(rows)


def launched_ns(events: list[dict[str, Any]]) -> int:
    return sum(e["t1"] - e["t0"] for _, e in launches(events))


def device_ns(events: list[dict[str, Any]]) -> int:
    return sum(e["t1"] - e["t0"] for e in events if e.get("cat") in DEVICE_CATS)


# ---- the tests --------------------------------------------------------------------------------------

@pytest.fixture
def capture(tmp_path: Path) -> Path:
    return flashinfer_like().write(tmp_path / "flashinfer_like.json")


def test_the_fixture_has_the_three_shapes(capture: Path) -> None:
    events = read_events(capture)
    kinds = {launch_row(events, call)[1] for call, _ in launches(events)}
    assert kinds == {"operator", "python", "runtime"}
    assert launch_row(events, next(c for c, k in launches(events) if k["name"] == "BatchDecodeKernel")) == (
        "vllm::unified_attention", "operator")  # a cpu_op further up than the launch frame
    assert launch_row(events, next(c for c, k in launches(events) if k["name"] == "moe_gemm_kernel")) == (
        LAUNCH_FRAME, "python")  # inside ProfilerStep#1, a user_annotation: the frame keeps it


def test_default_view_device_total_equals_the_card_and_the_file(store: RunStore, capture: Path) -> None:
    events = read_events(capture)
    rec = ingest_paths(store, [capture])
    rows = load_ops(store, rec.id, limit=None)
    assert sum(r["self_device_ns"] for r in rows) == rec.summary.device.attributed_ns == launched_ns(events)
    assert rec.summary.device.device_total_ns == device_ns(events)
    assert rec.summary.device.unattributed_ns == 7250  # the orphan kernel: no call in the trace launched it
    assert sum(r["device_pct"] for r in rows) == pytest.approx(100 * launched_ns(events) / device_ns(events))


def test_rows_are_the_launching_op_frame_or_call(store: RunStore, capture: Path) -> None:
    events = read_events(capture)
    rec = ingest_paths(store, [capture])
    rows = load_ops(store, rec.id, limit=None)
    assert {r["name"]: r["self_device_ns"] for r in rows if r["self_device_ns"]} == reference_self_device(events)
    kinds = {r["name"]: r["kind"] for r in rows}
    expected = {launch_row(events, call) for call, _ in launches(events)}
    assert {(name, kinds[name]) for name, _ in expected} == expected
    # the launch frame's second call sits under vllm::unified_attention: that launch is the op's, not the frame's
    frame = next(r for r in load_ops(store, rec.id, view="python", limit=None) if r["name"] == LAUNCH_FRAME)
    moe = next(e for e in events if e["name"] == "moe_gemm_kernel")
    decode = next(e for e in events if e["name"] == "BatchDecodeKernel")
    assert frame["calls"] == 2 and frame["self_device_ns"] == moe["t1"] - moe["t0"]
    assert frame["device_total_ns"] == (moe["t1"] - moe["t0"]) + (decode["t1"] - decode["t0"])


def test_aten_only_traces_are_unchanged_by_the_roll_up(store: RunStore, tmp_path: Path) -> None:
    """With launches straight under aten ops, the operators view is the operator rows, as before."""
    t = Trace()
    t.host("cpu_op", "aten::mm", "10.000", "50.000", ext=1)
    t.launch("cuda_runtime", "cudaLaunchKernel", "20.000", "gemm_kernel", "100.000", "40.125", ext=1)
    t.host("python_function", "train.py(3): step", "200.000", "40.000")
    rec = ingest_paths(store, [t.write(tmp_path / "aten.json")])
    rows = load_ops(store, rec.id, view="all", limit=None)
    assert {(r["name"], r["kind"], r["self_device_ns"]) for r in rows} == {
        ("aten::mm", "operator", 40125), ("train.py(3): step", "python", 0)}
    assert [r["name"] for r in load_ops(store, rec.id)] == ["aten::mm"]


def test_overview_top_op_is_the_launch_frame_not_the_all_reduce(store: RunStore, capture: Path) -> None:
    events = read_events(capture)
    rec = ingest_paths(store, [capture])
    top_device, _ = overview_top_ops(Run.of(store, rec.id))
    truth = reference_self_device(events)
    assert top_device[0]["name"] == max(truth, key=lambda k: truth[k]) == LAUNCH_FRAME
    assert {r["name"]: r["self_device_ns"] for r in top_device} == truth


def test_ops_page_and_twin_carry_the_attributed_time(store: RunStore, capture: Path) -> None:
    events = read_events(capture)
    rec = ingest_paths(store, [capture])
    data = compute_run_ops(Run.of(store, rec.id))
    assert data["attributed_ns"] == launched_ns(events) == sum(r["self_device_ns"] for r in data["rows"])
    assert data["device_total_ns"] == device_ns(events)
    page = build_ops_page(Run.of(store, rec.id))
    assert page.attributed_ns == data["attributed_ns"] and page.device_total_ns == data["device_total_ns"]


def test_cli_ops_agrees(tmp_path: Path, capture: Path) -> None:
    events = read_events(capture)
    data, runner = str(tmp_path / "data"), CliRunner()
    run_id = runner.invoke(main, ["ingest", str(capture), "--data-dir", data]).stdout.strip().splitlines()[-1]
    result = runner.invoke(main, ["ops", run_id, "--json", "--limit", "100", "--data-dir", data])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert sum(r["self_device_ns"] for r in rows) == launched_ns(events)
    assert {r["name"]: r["self_device_ns"] for r in rows if r["self_device_ns"]} == reference_self_device(events)
    table = runner.invoke(main, ["ops", run_id, "--data-dir", data])
    assert table.exit_code == 0 and "kind" in table.stdout and "runtime" in table.stdout  # marked as launch sites


def test_two_ranks_with_the_same_correlation_ids(store: RunStore, tmp_path: Path) -> None:
    """Each file numbers its correlation ids from 1: a bare launch is matched within its own file (the flows)."""
    paths = [flashinfer_like(rank).write(tmp_path / f"rank{rank}.json") for rank in (0, 1)]
    rec = ingest_paths(store, paths)
    per_file = [read_events(p) for p in paths]
    assert sum(r["self_device_ns"] for r in load_ops(store, rec.id, limit=None)) == rec.summary.device.attributed_ns
    assert rec.summary.device.attributed_ns == sum(launched_ns(e) for e in per_file)
    for rank, events in enumerate(per_file):
        data = compute_run_ops(Run.of(store, rec.id), OpsQuery(rank=str(rank)))
        assert sum(r["self_device_ns"] for r in data["rows"]) == data["attributed_ns"] == launched_ns(events)


# ---- the python frames view's default sort -------------------------------------------------------------

def test_python_view_sorts_by_cpu_total(store: RunStore, capture: Path) -> None:
    assert default_op_sort(1, "python") == default_op_sort(0, "python") == "-cpu_total_ns"
    assert default_op_sort(1, "operators") == default_op_sort(1, "all") == "-self_device_ns"
    events = read_events(capture)
    rec = ingest_paths(store, [capture])
    data = compute_run_ops(Run.of(store, rec.id), OpsQuery(view="python"))
    assert data["sort"] == "-cpu_total_ns"
    frames: dict[str, int] = defaultdict(int)
    for e in events:
        if e["cat"] == "python_function":
            frames[e["name"]] += e["t1"] - e["t0"]
    assert [(r["name"], r["cpu_total_ns"]) for r in data["rows"]] == sorted(frames.items(), key=lambda kv: (-kv[1], kv[0]))
    assert all(r["cpu_total_ns"] > 0 for r in data["rows"])
    assert compute_run_ops(Run.of(store, rec.id))["sort"] == "-self_device_ns"


# ---- every Kineto trace in ../shared/traces -------------------------------------------------------------

def shared_kineto_traces() -> list[str]:
    root = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*.json*")
                   if p.name.endswith((".json", ".json.gz")) and p.parts[len(root.parts)] in (
                       "HolisticTraceAnalysis", "kineto", "dtu_mlops") and not p.name.endswith("_et.json.gz"))
    return found or ["(absent)"]


@pytest.mark.shared
@pytest.mark.parametrize("name", shared_kineto_traces())
def test_shared_traces_default_view_holds_all_attributed_device_time(shared_traces: Path, store: RunStore,
                                                                     name: str) -> None:
    rec = ingest_paths(store, [shared_traces / name])
    rows = load_ops(store, rec.id, limit=None)
    assert sum(r["self_device_ns"] for r in rows) == rec.summary.device.attributed_ns


def test_ops_page_says_what_no_row_holds(tmp_path: Path, capture: Path) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from explorer.config import Settings
    from explorer.views.render import fmt_us

    events = read_events(capture)
    app = create_app(Settings(data_dir=tmp_path / "data"))
    run_id = ingest_paths(app.state.explorer.store, [capture]).id
    with TestClient(app) as client:
        html = client.get(f"/runs/{run_id}/ops").text
    note = html[html.index('id="ops-device-note"'):].split("</p>")[0]
    assert fmt_us(launched_ns(events)) in note and fmt_us(device_ns(events) - launched_ns(events)) in note
    assert "no launch linked" in note
    assert '<span class="pill" title="a runtime call' in html and "launch</span>" in html


def test_overview_names_its_launch_sites(tmp_path: Path, capture: Path) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from explorer.config import Settings

    events = read_events(capture)
    sites = {(n, k) for n, k in (launch_row(events, c) for c, _ in launches(events)) if k != "operator"}
    app = create_app(Settings(data_dir=tmp_path / "data"))
    run_id = ingest_paths(app.state.explorer.store, [capture]).id
    with TestClient(app) as client:
        html = client.get(f"/runs/{run_id}").text
    note = html[html.index('id="top-device-sites"'):].split("</p>")[0]
    for name, kind in sites:
        assert f'{"Python frame" if kind == "python" else "runtime call"} <span class="mono">{name}</span>' in note
