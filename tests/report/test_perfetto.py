"""The Perfetto export against the truth: the exported file read back by the explorer's own parser gives the
same slices (name, ts, dur in ns, count per lane), flows and counters; its X events equal the raw trace's
(decimal arithmetic on the file's text); and on every exported thread slices nest strictly, as Perfetto needs."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.report.perfetto import export_origin, us_text, write_perfetto_json
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import load_device_timeline
from explorer.store.runs import RunStore
from tests.conftest import FIXTURES
from tests.helpers.support import cli

GPU_TRACE = "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
NEURON_EXPORT = FIXTURES / "neuron" / "device_export"


@pytest.mark.parametrize(("ns", "text"), [(0, "0.000"), (1, "0.001"), (999, "0.999"), (1000, "1.000"),
                                          (1_700_000_000_123_456_789, "1700000000123456.789"), (-1, "-0.001"),
                                          (-1500, "-1.500")])
def test_us_text_is_exact_decimal(ns: int, text: str) -> None:
    assert us_text(ns) == text
    assert int(Decimal(text) * 1000) == ns


def perfetto_ns(text: Any) -> int:
    """A "ts" or "dur" as Perfetto's JSON importer reads it: the text as a double, times 1000, rounded
    half away from zero (llround); this, not the decimal value, is what its slice nesting sees."""
    x = float(str(text)) * 1000.0
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def export_doc(store: RunStore, run_id: str, path: Path) -> dict[str, Any]:
    with path.open("wb") as fh:
        write_perfetto_json(store, run_id, fh, load_device_timeline(store, run_id))
    doc: dict[str, Any] = json.loads(path.read_text(), parse_float=Decimal)  # exact: no float on the way in
    return doc


def ns(text: Any) -> int:
    """Decimal µs (as the JSON text has it) -> integer ns, away from floats."""
    return int((Decimal(str(text)) * 1000).to_integral_value())


def assert_strictly_nested(doc: dict[str, Any]) -> None:
    """What Perfetto requires of X events on one (pid, tid), with the times as it reads them (a double
    each): any two either nest or are disjoint; and every time it reads is the exact one."""
    by_thread: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ts") is not None:
            assert perfetto_ns(e["ts"]) == ns(e["ts"]), f"Perfetto reads {e['ts']} as {perfetto_ns(e['ts'])} ns"
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((perfetto_ns(e["ts"]), perfetto_ns(e["dur"])))
    for key, spans in by_thread.items():
        stack: list[int] = []  # open ends
        for ts, dur in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= ts:
                stack.pop()
            assert not stack or ts + dur <= stack[-1], f"partial overlap on {key} at {ts}"
            stack.append(ts + dur)


def slice_rows(store: RunStore, run_id: str) -> Counter[tuple[str, str, int, int]]:
    t = store.table(run_id, "slices")
    return Counter(zip(t.column("lane").to_pylist(), t.column("name").to_pylist(), t.column("ts_ns").to_pylist(),
                       t.column("dur_ns").to_pylist(), strict=True))


def flow_ends(store: RunStore, run_id: str) -> Counter[tuple[str, int, str, int]]:
    s, f = store.table(run_id, "slices"), store.table(run_id, "flows")
    name, ts = s.column("name").to_pylist(), s.column("ts_ns").to_pylist()
    return Counter((name[a], ts[a], name[b], ts[b]) for a, b in zip(f.column("from_slice").to_pylist(),
                                                                     f.column("to_slice").to_pylist(), strict=True))


def counter_series(store: RunStore, run_id: str, skip: frozenset[str] = frozenset()) -> Counter[tuple[str, int, float]]:
    tracks = store.table(run_id, "tracks")
    label = dict(zip(tracks.column("track_id").to_pylist(), tracks.column("label").to_pylist(), strict=True))
    c = store.table(run_id, "counters")
    return Counter((label[t], ts, v) for t, ts, v in zip(c.column("track_id").to_pylist(), c.column("ts_ns").to_pylist(),
                                                         c.column("value").to_pylist(), strict=True)
                   if label[t] not in skip)


def round_trip(store: RunStore, source: Path, tmp_path: Path) -> tuple[str, str, dict[str, Any]]:
    original = ingest_paths(store, [source], "original").id
    doc = export_doc(store, original, tmp_path / "export.json")
    back = ingest_paths(store, [tmp_path / "export.json"], "re-ingested").id
    return original, back, doc


def assert_same_run(store: RunStore, a: str, b: str) -> None:
    assert slice_rows(store, a) == slice_rows(store, b)
    assert store.get(a).summary.slices_per_lane == store.get(b).summary.slices_per_lane
    assert flow_ends(store, a) == flow_ends(store, b)
    assert counter_series(store, a) == counter_series(store, b)


@pytest.mark.slow
def test_torch_trace_round_trips(store: RunStore, stack_trace: Path, tmp_path: Path) -> None:
    a, b, doc = round_trip(store, stack_trace, tmp_path)
    assert_same_run(store, a, b)
    assert_strictly_nested(doc)
    # against the raw file: every X event of the profiler's trace, times from its decimal text
    raw = json.loads(stack_trace.read_text(), parse_float=Decimal)
    base = int(raw.get("baseTimeNanoseconds", 0))
    want = Counter((e["name"], base + ns(e["ts"]), ns(e["dur"])) for e in raw["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") != "Trace")
    origin = int(doc.get("baseTimeNanoseconds", 0))
    got = Counter((e["name"], origin + ns(e["ts"]), ns(e["dur"])) for e in doc["traceEvents"] if e["ph"] == "X"
                  and e["cat"] != "Trace")
    assert got == want and sum(want.values()) > 50
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any("thread" in n for n in names)


@pytest.mark.shared
def test_gpu_trace_with_flows_and_overlaps_round_trips(store: RunStore, shared_traces: Path, tmp_path: Path) -> None:
    a, b, doc = round_trip(store, shared_traces / GPU_TRACE, tmp_path)
    assert_same_run(store, a, b)
    assert_strictly_nested(doc)
    raw = json.loads(gzip.decompress((shared_traces / GPU_TRACE).read_bytes()), parse_float=Decimal)
    raw_x = Counter((e["name"], ns(e["ts"]), ns(e["dur"])) for e in raw["traceEvents"] if e.get("ph") == "X")
    origin = int(doc.get("baseTimeNanoseconds", 0))  # its epoch-µs times are written relative to a second
    assert origin > 0 and origin % 10**9 == 0
    assert Counter((e["name"], origin + ns(e["ts"]), ns(e["dur"])) for e in doc["traceEvents"]
                   if e["ph"] == "X") == raw_x
    assert store.get(a).summary.flows > 100  # ac2g flows and correlation links, all kept (compared above)
    assert sum(e["ph"] == "s" for e in doc["traceEvents"]) == store.get(a).summary.flows
    assert any(w.code == "overlap" for w in store.get(a).summary.warnings)  # partial overlaps took extra tids
    assert any("(overlap" in e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name")


def test_partial_overlaps_go_to_extra_threads(store: RunStore, tmp_path: Path) -> None:
    events = [{"ph": "X", "name": n, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": ts, "dur": dur}
              for n, ts, dur in (("a", 0, 10), ("b", 5, 10), ("c", 6, 2), ("d", 12, 10), ("e", 20, 1))]
    (tmp_path / "overlaps.json").write_text(json.dumps({"traceEvents": events}))
    a, b, doc = round_trip(store, tmp_path / "overlaps.json", tmp_path)
    assert_strictly_nested(doc)
    assert slice_rows(store, a) == slice_rows(store, b) and sum(slice_rows(store, b).values()) == 5
    assert len({e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"}) >= 2


def test_neuron_export_round_trips_with_device_tracks(store: RunStore, tmp_path: Path) -> None:
    a, b, doc = round_trip(store, NEURON_EXPORT, tmp_path)
    assert_strictly_nested(doc)
    system = slice_rows(store, a)
    back = slice_rows(store, b)
    assert all(back[k] == v for k, v in system.items())  # the system timeline is all there
    # each device profile's instructions and DMA packets, counted from the fixture's Parquet files
    for profile in ("rmsnorm_naive", "matmul"):
        folder = NEURON_EXPORT / f"{profile}@latest"
        insts = sum(pa.parquet.read_table(p).num_rows for p in folder.glob("Instruction*.parquet"))
        dma = pa.parquet.read_table(folder / "DmaPacket.parquet").num_rows
        pid = next(e["pid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"
                   and e["args"]["name"] == f"Neuron device profile {profile}")
        cats = Counter(e["cat"] for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == pid)
        assert cats["Instruction"] == insts and cats["DmaPacket"] == dma
    assert sum(n for (lane, *_), n in back.items() if lane == "other") == sum(
        e["ph"] == "X" and e["cat"] in ("Instruction", "DmaPacket", "CcInstruction") for e in doc["traceEvents"])
    # the run's counters come back unchanged (device counters are extra series)
    assert counter_series(store, a) <= counter_series(store, b)
    assert sum(e["ph"] == "C" for e in doc["traceEvents"]) == store.get(b).summary.counters


def test_export_route_and_cli(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        store = client.app.state.explorer.store  # type: ignore[attr-defined]
        run_id = ingest_paths(store, [FIXTURES / "neuron" / "formats" / "neuron_export.json"], "nx").id
        r = client.get(f"/api/runs/{run_id}/export?format=perfetto-json")
        assert r.status_code == 200
        assert r.headers["content-disposition"] == f'attachment; filename="{run_id}.perfetto.json"'
        assert sum(e["ph"] == "X" for e in json.loads(r.text)["traceEvents"]) == store.get(run_id).summary.slices
        bad = client.get(f"/api/runs/{run_id}/export?format=pprof")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_request"
        assert "perfetto-json" in bad.json()["error"]["message"]
        assert client.get("/api/runs/nope/export").status_code == 404
        page = client.get(f"/runs/{run_id}").text
        assert f'/api/runs/{run_id}/export?format=perfetto-json' in page and "ui.perfetto.dev" in page
    out = tmp_path / "cli.json"
    proc = subprocess.run(cli("export", run_id, "--format", "perfetto-json", "-o", str(out), "--data-dir",
                              str(settings.data_dir)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == r.content
    proc = subprocess.run(cli("export", "nope", "-o", str(tmp_path / "x.json"), "--data-dir", str(settings.data_dir)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no run" in proc.stderr and not (tmp_path / "x.json").exists()


def test_flows_stay_on_a_parent_whose_child_starts_with_it(store: RunStore, tmp_path: Path) -> None:
    # A [0, 100) holds B [0, 30) and B2 [30.001, 40): a step at A's start would bind to B (the innermost
    # slice there), so the export binds A's steps to the first time only A covers (40 µs + 1 ns)
    x = [("A", 1, 0, 100), ("B", 1, 0, 30), ("B2", 1, 30.001, 9.999), ("C", 2, 50, 10), ("D", 2, 50, 5)]
    events: list[dict[str, Any]] = [{"ph": "X", "name": n, "cat": "cpu_op", "pid": 1, "tid": t, "ts": ts, "dur": d}
                                    for n, t, ts, d in x]
    events += [{"ph": "s", "id": 7, "cat": "flow", "name": "f", "pid": 1, "tid": 1, "ts": 45},
               {"ph": "f", "id": 7, "cat": "flow", "name": "f", "pid": 1, "tid": 2, "ts": 52, "bp": "e"}]
    (tmp_path / "flows.json").write_text(json.dumps({"traceEvents": events}))
    a, b, doc = round_trip(store, tmp_path / "flows.json", tmp_path)
    assert flow_ends(store, a) == Counter({("A", 0, "D", 50_000): 1})
    assert flow_ends(store, b) == flow_ends(store, a)
    s = next(e for e in doc["traceEvents"] if e["ph"] == "s")
    assert ns(s["ts"]) == 40_001


EPOCH_NS = 1_712_195_495_502_094_565  # an epoch time in ns, as Kineto's baseTimeNanoseconds makes them


def test_epoch_times_are_written_relative_to_a_whole_second(store: RunStore, tmp_path: Path) -> None:
    # a parent and a child ending at the parent's end, 1.7e18 ns after the epoch: written as they are, Perfetto
    # reads 1712195495502094.565 µs as ...094.5625 (a double's 0.25 µs step), shifting the child past its parent
    base = EPOCH_NS - 94_565  # the trace's own ts are small, base adds the epoch (Kineto's form)
    x = [("parent", 94.565, 35.869), ("child", 100.001, 30.433), ("grandchild", 110.5, 20.0)]
    events = [{"ph": "X", "name": n, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": ts, "dur": d} for n, ts, d in x]
    (tmp_path / "epoch.json").write_text(json.dumps({"baseTimeNanoseconds": base, "traceEvents": events}))
    a, b, doc = round_trip(store, tmp_path / "epoch.json", tmp_path)
    assert slice_rows(store, a) == slice_rows(store, b)  # the explorer adds baseTimeNanoseconds back
    origin = int(doc["baseTimeNanoseconds"])
    assert origin == EPOCH_NS // 10**9 * 10**9
    got = {e["name"]: (origin + ns(e["ts"]), ns(e["dur"])) for e in doc["traceEvents"] if e["ph"] == "X"}
    assert got == {n: (base + ns(Decimal(str(ts))), ns(Decimal(str(d)))) for n, ts, d in x}
    assert_strictly_nested(doc)  # as Perfetto reads the times: exact, so still nested


@pytest.mark.parametrize(("times", "origin"), [([0, 2**50 - 1], 0), ([5, 10**15], 0),
                                               ([EPOCH_NS, EPOCH_NS + 10**9], EPOCH_NS // 10**9 * 10**9),
                                               ([2**50, 2**50 + 1], 2**50 // 10**9 * 10**9), ([-1, 10], -(10**9))])
def test_export_origin(times: list[int], origin: int) -> None:
    assert export_origin([np.array(times, dtype=np.int64), np.array([], dtype=np.int64)]) == origin
    for t in times:  # every time, relative to the origin, is one Perfetto reads exactly
        assert perfetto_ns(us_text(t - origin)) == t - origin


def test_a_flow_into_an_earlier_slice_is_written_in_time_order(store: RunStore, tmp_path: Path) -> None:
    # a launch and its kernel linked by their `correlation` (no flow events), the kernel starting 10 µs before
    # the launch (clock skew): Perfetto pairs s and f in time order and drops an f it reads before its s
    # (flow_end_without_start), so the export writes the earlier end as `s`
    x = [("cudaLaunchKernel", 1, 50, 10), ("kernel_a", 2, 40, 5), ("cudaLaunchKernel", 1, 70, 10), ("kernel_b", 2, 90, 5)]
    events = [{"ph": "X", "name": n, "cat": "cuda_runtime" if t == 1 else "kernel", "pid": 1, "tid": t, "ts": ts,
               "dur": d, "args": {"correlation": 1 + i // 2, "External id": 1 + i // 2}}
              for i, (n, t, ts, d) in enumerate(x)]
    (tmp_path / "skew.json").write_text(json.dumps({"traceEvents": events}))
    a, b, doc = round_trip(store, tmp_path / "skew.json", tmp_path)
    assert flow_ends(store, a) == Counter({("cudaLaunchKernel", 50_000, "kernel_a", 40_000): 1,
                                           ("cudaLaunchKernel", 70_000, "kernel_b", 90_000): 1})
    steps = {(e["id"], e["ph"]): (e["tid"], ns(e["ts"])) for e in doc["traceEvents"] if e["ph"] in ("s", "f")}
    assert len(steps) == 4 and all(steps[(i, "s")][1] <= steps[(i, "f")][1] for i, _ in steps)
    assert sorted(steps.values()) == [(1, 50_000), (1, 70_000), (2, 40_000), (2, 90_000)]
