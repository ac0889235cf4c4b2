"""Op table views (operators, python frames, all), device totals once per row under recursive frames,
the default sort rule and grouping by nn.Module, each checked against numbers computed here from the
trace file itself (decimal µs, time containment) or against torch.profiler's key_averages()."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from explorer.analysis.op_stats import compute_op_stats
from explorer.errors import BadRequest
from explorer.ingest.chrome import fast as chrome_fast
from explorer.runs.ingest import ingest_paths
from explorer.store.queries import OP_VIEWS, default_op_sort, has_module_frames, load_ops
from explorer.store.run_queries import load_ops_in_range
from explorer.store.runs import RunStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kineto_recursive_frames.json"
OP_CATS = {"cpu_op", "user_annotation", "python_function"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
MODULE = "nn.Module: "


# ---- the reference: the trace read with decimal arithmetic, nesting by time containment ------------

def ns(us: Any) -> int:
    return int(Decimal(us) * 1000)


def load_events(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text(), parse_float=Decimal)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    for e in events:
        e["t0"], e["t1"] = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
    return events


def enclosing(events: list[dict[str, Any]], inner: dict[str, Any], cats: set[str]) -> list[dict[str, Any]]:
    """Host events of `cats` on inner's thread that contain it (itself excluded), outermost first."""
    return sorted((e for e in events if e is not inner and e["cat"] in cats and e["tid"] == inner["tid"]
                   and e["pid"] == inner["pid"] and e["t0"] <= inner["t0"] and inner["t1"] <= e["t1"]),
                  key=lambda e: (e["t0"], -e["t1"]))


def module_path(events: list[dict[str, Any]], op: dict[str, Any]) -> str:
    frames = [e for e in enclosing(events, op, {"python_function"}) if e["name"].startswith(MODULE)]
    return "/".join(e["name"][len(MODULE):] for e in frames)


def reference(path: Path, by_module: bool = False, by_shape: bool = False) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (module path, input shapes or "", name): calls, CPU total, kind, self device and device
    total (each kernel once per row), from the launching runtime call's enclosing ops."""
    events = load_events(path)
    ops = [e for e in events if e["cat"] in OP_CATS]

    def key(e: dict[str, Any]) -> tuple[str, str]:
        if by_shape:
            return json.dumps(e["args"].get("Input Dims", [])), e["name"]
        return (module_path(events, e) if by_module else "", e["name"])

    rows: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: {
        "calls": 0, "cpu_total_ns": 0, "self_cpu_ns": 0, "self_device_ns": 0, "device_total_ns": 0, "cats": set()})
    for e in ops:
        row = rows[key(e)]
        row["calls"] += 1
        row["cpu_total_ns"] += e["t1"] - e["t0"]
        row["self_cpu_ns"] += e["t1"] - e["t0"]
        row["cats"].add(e["cat"])
    for e in (e for e in events if e["cat"] in OP_CATS | RUNTIME_CATS):  # self CPU: minus direct children
        parents = enclosing(events, e, OP_CATS | RUNTIME_CATS)
        if parents:
            rows[key(parents[-1])]["self_cpu_ns"] -= e["t1"] - e["t0"]
    runtime = {e["args"]["correlation"]: e for e in events if e["cat"] in RUNTIME_CATS}
    for k in (e for e in events if e["cat"] == "kernel"):
        above = enclosing(events, runtime[k["args"]["correlation"]], OP_CATS)
        # self device time: the innermost enclosing op; for a Python frame, the nearest cpu_op above it, else
        # the frame (a user_annotation range is not where a frame's launch rolls up to)
        ops_above = [e for e in above if e["cat"] == "cpu_op"] if above[-1]["cat"] == "python_function" else []
        rows[key((ops_above or above)[-1])]["self_device_ns"] += k["t1"] - k["t0"]
        for row_key in {key(e) for e in above}:
            rows[row_key]["device_total_ns"] += k["t1"] - k["t0"]
    for row in rows.values():
        row["kind"] = "python" if row.pop("cats") == {"python_function"} else "operator"
    return dict(rows)


def in_view(row: dict[str, Any], view: str) -> bool:
    """The views' rule: operators keep operator rows and any row with self device time (launch sites)."""
    if view == "python":
        return bool(row["kind"] == "python")
    return view == "all" or row["kind"] == "operator" or row["self_device_ns"] > 0


def device_all_ns(path: Path) -> int:
    return sum(e["t1"] - e["t0"] for e in load_events(path) if e["cat"] == "kernel")


@pytest.fixture
def frames_run(store: RunStore) -> str:
    return ingest_paths(store, [FIXTURE]).id


# ---- the synthetic trace: python frames f -> g -> f over an op whose kernel came through a flow ----

FIELDS = ("calls", "cpu_total_ns", "self_cpu_ns", "self_device_ns", "device_total_ns", "kind")


@pytest.mark.parametrize("view", list(OP_VIEWS))
def test_each_view_equals_the_reference_rows_of_its_kind(store: RunStore, frames_run: str, view: str) -> None:
    truth = {name: row for (_, name), row in reference(FIXTURE).items() if in_view(row, view)}
    ours = {r["name"]: {f: r[f] for f in FIELDS} for r in load_ops(store, frames_run, view=view)}
    assert ours == truth


def test_recursive_frames_count_each_kernel_once() -> None:
    # the fixture is built so that f -> g -> f encloses the gemm: guard that the case is really there
    events = load_events(FIXTURE)
    gemm = next(e for e in events if e["name"] == "sm80_gemm_kernel")
    launch = next(e for e in events if e.get("args", {}).get("correlation") == gemm["args"]["correlation"]
                  and e["cat"] == "cuda_runtime")
    names = [e["name"] for e in enclosing(events, launch, OP_CATS)]
    assert names.count("model.py(10): f") == 2
    relu = next(e for e in events if e["name"] == "relu_kernel")
    f_row = reference(FIXTURE)[("", "model.py(10): f")]
    assert f_row["device_total_ns"] == (gemm["t1"] - gemm["t0"]) + (relu["t1"] - relu["t0"])


@pytest.mark.parametrize("view", list(OP_VIEWS))
def test_device_pct_is_self_device_over_all_device_time(store: RunStore, frames_run: str, view: str) -> None:
    rows = load_ops(store, frames_run, view=view)
    total = device_all_ns(FIXTURE)
    for r in rows:
        assert r["device_pct"] == pytest.approx(100 * r["self_device_ns"] / total)
    share = sum(r["self_device_ns"] for r in rows)
    assert sum(r["device_pct"] for r in rows) == pytest.approx(100 * share / total)
    assert sum(r["device_pct"] for r in rows) <= 100 + 1e-9
    if view in ("all", "operators"):  # every kernel of the fixture was launched by some op or frame, and the
        assert share == total  # one launched straight from a python frame is in the operators view as that frame
    if view == "python":  # the frames' share: only that launch (the others roll up to their ops)
        assert 0 < share < total


def test_a_name_of_both_kinds_is_one_row_counted_as_an_operator(store: RunStore, frames_run: str) -> None:
    cats = {e["cat"] for e in load_events(FIXTURE) if e["name"] == "forward"}
    assert cats == {"user_annotation", "python_function"}
    all_rows = [r for r in load_ops(store, frames_run, view="all") if r["name"] == "forward"]
    assert [(r["kind"], r["calls"]) for r in all_rows] == [("operator", 2)]
    assert [r["name"] for r in load_ops(store, frames_run, view="operators", name_filter="forward")] == ["forward"]
    assert load_ops(store, frames_run, view="python", name_filter="forward") == []


def test_by_shape_rows_count_each_kernel_once_per_name_and_shapes(store: RunStore, frames_run: str) -> None:
    truth = reference(FIXTURE, by_shape=True)
    assert truth[("[]", "model.py(10): f")]["calls"] == 3  # the recursive frames share a row
    ours = {(r["input_shapes"], r["name"]): {f: r[f] for f in FIELDS}
            for r in load_ops(store, frames_run, view="all", by_shape=True)}
    assert ours == truth


def test_unknown_view_is_a_bad_request(store: RunStore, frames_run: str) -> None:
    with pytest.raises(BadRequest, match="view"):
        load_ops(store, frames_run, view="kernels")


# ---- the default sort ------------------------------------------------------------------------------

def test_default_sort_is_self_device_time_when_there_is_device_time() -> None:
    assert default_op_sort(1) == "-self_device_ns"
    assert default_op_sort(0) == "-self_cpu_ns"


def test_default_order_follows_the_rule(store: RunStore, frames_run: str, tmp_path: Path) -> None:
    rows = load_ops(store, frames_run, view="all")
    assert [r["self_device_ns"] for r in rows] == sorted((r["self_device_ns"] for r in rows), reverse=True)
    host = tmp_path / "host.json"
    doc = json.loads(FIXTURE.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("pid") != 0]
    host.write_text(json.dumps(doc))
    host_rows = load_ops(store, ingest_paths(store, [host]).id, view="all")
    assert [r["self_cpu_ns"] for r in host_rows] == sorted((r["self_cpu_ns"] for r in host_rows), reverse=True)


# ---- group by module ------------------------------------------------------------------------------

@pytest.mark.parametrize("view", list(OP_VIEWS))
def test_by_module_rows_equal_the_reference(store: RunStore, frames_run: str, view: str) -> None:
    truth = {k: row for k, row in reference(FIXTURE, by_module=True).items() if in_view(row, view)}
    ours = {(r["module"], r["name"]): {f: r[f] for f in FIELDS}
            for r in load_ops(store, frames_run, view=view, by_module=True)}
    assert ours == truth
    assert has_module_frames(store, frames_run)


def test_module_paths_survive_a_time_range_that_cuts_the_module_frames(store: RunStore, frames_run: str) -> None:
    base = int(json.loads(FIXTURE.read_text())["baseTimeNanoseconds"])
    mm = next(e for e in load_events(FIXTURE) if e["name"] == "aten::mm")
    # only ops starting at or after aten::mm: the frames enclosing it start before and are not counted
    rows = load_ops_in_range(store, frames_run, base + mm["t0"], base + 10**12, view="all", by_module=True)
    assert ("Net_0/Linear_0", "aten::mm") in {(r["module"], r["name"]) for r in rows}
    assert not any(r["name"].startswith(MODULE) for r in rows)
    whole = load_ops_in_range(store, frames_run, base, base + 10**12, view="all", by_module=True)
    assert whole == load_ops(store, frames_run, view="all", by_module=True)


# ---- runs stored before op tables had a kind column ----------------------------------------------

def test_runs_stored_without_kind_are_computed_on_load(tmp_path: Path) -> None:
    data = tmp_path / "old"
    run_id = ingest_paths(RunStore(data), [FIXTURE]).id
    for table in ("op_stats", "op_stats_by_shape"):
        path = data / "runs" / run_id / f"{table}.parquet"
        pq.write_table(pq.read_table(path).drop_columns(["kind"]), path)
    store = RunStore(data)  # a fresh cache, as after a restart
    assert "kind" not in store.table(run_id, "op_stats").column_names
    truth = {name for (_, name), row in reference(FIXTURE).items() if in_view(row, "operators")}
    assert {r["name"] for r in load_ops(store, run_id)} == truth
    assert {r["name"] for r in load_ops(store, run_id, view="python", by_shape=True)} == {
        name for (_, name), row in reference(FIXTURE).items() if row["kind"] == "python"}


# ---- a real trace with recursive annotations --------------------------------------------------------

ALEXNET = "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
HIDDEN = {"[memory]", "aten::is_leaf", "aten::output_nr", "aten::_version"}


@pytest.mark.shared
def test_real_trace_device_totals_count_each_execution_once_per_name(shared_traces: Path, store: RunStore,
                                                                    tmp_path: Path) -> None:
    import gzip

    # integer µs since the epoch (1.7e15): exact only if ingest never passes them through a float64
    doc = json.loads(gzip.decompress((shared_traces / ALEXNET).read_bytes()))
    assert all(isinstance(e["ts"], int) for e in doc["traceEvents"] if "ts" in e)
    assert min(e["ts"] for e in doc["traceEvents"] if "ts" in e) > 1.6e15
    plain = tmp_path / "alexnet.json"
    plain.write_text(json.dumps(doc))
    events = load_events(plain)
    runtime = {e["args"]["correlation"]: e for e in events if e["cat"] == "cuda_runtime" and "correlation" in e["args"]}
    truth: dict[str, int] = defaultdict(int)
    nested_twice = 0
    for k in (e for e in events if e["cat"] in DEVICE_CATS and e["args"].get("correlation") in runtime):
        names = [re.sub(r"^ProfilerStep#\d+$", "ProfilerStep*", e["name"])
                 for e in enclosing(events, runtime[k["args"]["correlation"]], OP_CATS) if e["name"] not in HIDDEN]
        nested_twice += len(names) != len(set(names))
        for name in set(names):
            truth[name] += k["t1"] - k["t0"]
    assert nested_twice  # the trace really nests some names inside themselves
    rows = load_ops(store, ingest_paths(store, [plain]).id, view="all")
    assert {r["name"]: r["device_total_ns"] for r in rows if r["device_total_ns"]} == dict(truth)


@pytest.mark.parametrize("reader", ["per event", "compiled"])
def test_the_stored_op_tables_equal_the_ones_made_again_from_the_stored_slices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """The ingest makes the op tables from its slices with names and shapes as codes into sorted values; a
    module view or a range makes them again from the stored slices, as text in first-seen order. Rows that tie
    on device and CPU time (here: every shape of one op, and ops of equal times) come in the same order both
    ways, and every number is the same."""
    if reader == "compiled":
        monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0)
    names = ["zeta::op", "alpha::op", "mid::op"]
    shapes = ["[[8]]", "[[2]]", "[]", "[[4]]"]
    events = [{"ph": "X", "cat": "cpu_op", "name": names[i % 3], "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
               "args": {"Input Dims": json.loads(shapes[i % 4])} if shapes[i % 4] != "[]" else {}}
              for i in range(120)]
    path = tmp_path / "ties.json"
    path.write_text(json.dumps({"traceEvents": events}))
    store = RunStore(tmp_path / "data")
    rec = ingest_paths(store, [path], "ties")
    stored_slices = pq.read_table(store.table_path(rec.id, "slices"))
    by_name, by_shape = compute_op_stats(stored_slices)
    assert store.table(rec.id, "op_stats").equals(by_name)
    assert store.table(rec.id, "op_stats_by_shape").equals(by_shape)
    assert by_name.column("name").to_pylist() == ["alpha::op", "mid::op", "zeta::op"]  # equal times: by name
    assert by_shape.num_rows == 12 and by_shape.column("calls").to_pylist() == [10] * 12
    assert by_shape.slice(0, 4).column("input_shapes").to_pylist() == ["[[2]]", "[[4]]", "[[8]]", "[]"]
