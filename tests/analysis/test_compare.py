"""Compare: the baseline rule, deltas of every run against the baseline (an op only in a middle run
included), Δ self device beside Δ inclusive, the kernel diff and the headline. Expected numbers are
computed here from the trace files (Decimal µs -> ns), not taken from the code under test."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from explorer.analysis.compare import (
    Baseline,
    RunOps,
    choose_baseline,
    compute_compare,
    compute_kernel_compare,
    kernel_table,
)
from explorer.errors import BadRequest
from explorer.model.tables import OP_STATS
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.compare import compute_run_compare

# ---- the baseline rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(("tags", "chosen", "expect"), [
    ([[], [], []], None, Baseline(0, "first")),
    ([[], ["before"], []], None, Baseline(1, "tagged", "before")),
    ([["cpu"], [], ["Baseline"]], None, Baseline(2, "tagged", "Baseline")),
    ([[], ["baseline"], ["before"]], None, Baseline(1, "tagged", "baseline")),  # the first tagged one
    ([[], ["before"], []], "c", Baseline(2, "chosen")),  # an explicit choice beats a tag
    ([["after"], ["beforehand"], []], None, Baseline(0, "first")),  # whole tags only
])
def test_choose_baseline(tags: list[list[str]], chosen: str | None, expect: Baseline) -> None:
    assert choose_baseline(["a", "b", "c"], tags, chosen) == expect


def test_a_baseline_outside_the_comparison_is_refused() -> None:
    with pytest.raises(BadRequest):
        choose_baseline(["a", "b"], [[], []], "z")


# ---- op tables built in the test -----------------------------------------------------------------

def op_table(rows: dict[str, tuple[int, int, int, int, int]]) -> pa.Table:
    """name -> (calls, device_total_ns, self_device_ns, cpu_total_ns, self_cpu_ns)."""
    return pa.Table.from_pylist([
        {"name": n, "input_shapes": "", "calls": c, "cpu_total_ns": ct, "self_cpu_ns": sc, "cpu_avg_ns": ct // c,
         "device_total_ns": dt, "self_device_ns": sd, "device_pct": 0.0}
        for n, (c, dt, sd, ct, sc) in rows.items()], schema=OP_STATS)


FIELDS = ("calls", "device_total_ns", "self_device_ns", "cpu_total_ns", "self_cpu_ns")


def test_chosen_baseline_is_listed_first_and_every_delta_is_against_it() -> None:
    a = {"aten::linear": (1, 900, 0, 1000, 100), "aten::addmm": (1, 900, 900, 900, 900)}
    b = {"aten::linear": (1, 300, 0, 800, 80), "aten::addmm": (1, 300, 300, 720, 720)}
    out = compute_compare([RunOps("a", "A", op_table(a), 900), RunOps("b", "B", op_table(b), 300)], baseline="b")
    assert [r["id"] for r in out["runs"]] == ["b", "a"] and out["baseline"] == {"id": "b", "reason": "chosen",
                                                                                  "tag": ""}
    linear = next(r for r in out["rows"] if r["name"] == "aten::linear")["vs_baseline"][0]
    assert linear["run"] == "a"
    assert linear["device_total_ns"] == a["aten::linear"][1] - b["aten::linear"][1]  # inclusive: +600
    assert linear["self_device_ns"] == a["aten::linear"][2] - b["aten::linear"][2]  # self: 0
    assert linear["pct_change"] == pytest.approx(100 * (900 - 300) / 300)
    assert out["headline"]["totals_ns"] == [300, 900] and out["headline"]["deltas_ns"] == [0, 600]


def test_three_runs_an_op_only_in_the_middle_run_gets_real_deltas() -> None:
    tables = [{"mul": (3, 1500, 1500, 300, 300)},
              {"mul": (1, 600, 600, 100, 100), "only_mid": (2, 250, 250, 40, 40)},
              {"mul": (1, 400, 400, 90, 90)}]
    runs = [RunOps(k, k, op_table(t), sum(v[2] for v in t.values())) for k, t in zip("abc", tables, strict=True)]
    out = compute_compare(runs)
    mid = next(r for r in out["rows"] if r["name"] == "only_mid")
    assert mid["per_run"][0] is None and mid["per_run"][2] is None
    assert [v["status"] for v in mid["vs_baseline"]] == ["added", "absent"]
    for field, pos in zip(FIELDS, range(5), strict=True):
        assert mid["vs_baseline"][0][field] == tables[1]["only_mid"][pos]
        assert mid["vs_baseline"][1][field] == 0
    mul = next(r for r in out["rows"] if r["name"] == "mul")
    assert [v["status"] for v in mul["vs_baseline"]] == ["changed", "changed"]  # 3 calls -> 1
    assert [v["self_device_ns"] for v in mul["vs_baseline"]] == [t["mul"][2] - tables[0]["mul"][2] for t in tables[1:]]


def test_rows_sort_by_largest_delta_of_self_device_time() -> None:
    base = {"big": (1, 5000, 5000, 10, 10), "moved": (1, 1000, 1000, 10, 10), "parent": (1, 9000, 0, 10, 10)}
    new = {"big": (1, 4900, 4900, 10, 10), "moved": (1, 3000, 3000, 10, 10), "parent": (1, 1000, 0, 10, 10)}
    out = compute_compare([RunOps("a", "a", op_table(base), 1), RunOps("b", "b", op_table(new), 1)])
    # |Δ self device|: moved 2000, big 100, parent 0 (its inclusive Δ is the largest, but it has no self time)
    assert [r["name"] for r in out["rows"]] == ["moved", "big", "parent"] and out["sort"] == "self_device_ns"


def test_host_only_runs_compare_summed_self_cpu() -> None:
    base = {"outer": (1, 0, 0, 1000, 200), "inner": (4, 0, 0, 800, 800)}
    new = {"outer": (1, 0, 0, 700, 300), "inner": (4, 0, 0, 400, 400)}
    out = compute_compare([RunOps("a", "a", op_table(base), 0), RunOps("b", "b", op_table(new), 0)])
    h = out["headline"]
    assert h["metric"] == "cpu_total_ns" and out["sort"] == "self_cpu_ns"
    assert h["totals_ns"] == [sum(v[4] for v in base.values()), sum(v[4] for v in new.values())]
    assert h["pct_change"][1] == pytest.approx(100 * (700 - 1000) / 1000)
    assert [r["name"] for r in out["rows"]] == ["inner", "outer"]  # |Δ self CPU| 400 > 100


# ---- kernels ------------------------------------------------------------------------------------------

def slices(rows: Iterable[tuple[str, int, bool]]) -> pa.Table:
    names, durs, dev = zip(*rows, strict=True)
    return pa.table({"name": list(names), "dur_ns": pa.array(durs, pa.int64()), "device_time": list(dev)})


def test_kernel_diff_added_removed_changed() -> None:
    a = [("gemm", 100, True), ("gemm", 50, True), ("add", 7, True), ("annotation", 999, False)]
    b = [("gemm", 60, True), ("fused", 30, True), ("annotation", 5, False)]
    out = compute_kernel_compare(["a", "b"], [kernel_table(slices(a)), kernel_table(slices(b))])
    rows = {r["name"]: r for r in out["rows"]}
    assert set(rows) == {"gemm", "add", "fused"}  # annotations are not device executions
    assert rows["gemm"]["status"] == "changed" and rows["gemm"]["vs_baseline"][0]["calls"] == 1 - 2
    assert rows["gemm"]["vs_baseline"][0]["total_ns"] == 60 - (100 + 50)
    assert rows["add"]["status"] == "removed" and rows["add"]["vs_baseline"][0]["total_ns"] == -7
    assert rows["fused"]["status"] == "added" and rows["fused"]["vs_baseline"][0]["pct_change"] is None
    assert out["runs"] == [{"id": "a", "calls": 3, "total_ns": 157}, {"id": "b", "calls": 2, "total_ns": 90}]
    assert [r["name"] for r in out["rows"]] == ["gemm", "fused", "add"]  # |Δ|: 90, 30, 7


# ---- from trace files: ingest, compare, check against the files --------------------------------------

# op name -> (children, kernels launched directly by it: (kernel name, µs as decimal text))
RUNS: dict[str, list[tuple[str, list[Any], list[tuple[str, str]]]]] = {
    "A": [("outer", [("aten::mul", [], [("k_mul", "100.125")]), ("aten::add", [], [("k_add", "40.5")])], []),
          ("aten::rsqrt", [], [("k_rsqrt", "30.25")])],
    "B": [("outer", [("aten::mul", [], [("k_mul", "60.5")])], []), ("only_mid", [], [("k_mid", "12.75")]),
          ("aten::rsqrt", [], [("k_rsqrt", "30.25")]), ("aten::rsqrt", [], [("k_rsqrt", "30.25")])],
    "C": [("outer", [("aten::mul", [], [("k_mul", "50.001")]), ("fused", [], [("k_fused", "20.333")])], []),
          ("aten::rsqrt", [], [("k_rsqrt", "28")])],
}


def write_trace(path: Path, ops: list[tuple[str, list[Any], list[tuple[str, str]]]]) -> Path:
    """A Kineto trace: ops on one thread (children inside parents), each kernel launched from inside its op
    by a cudaLaunchKernel with a correlation id, and run on stream 7. Times are written as decimal text."""
    events: list[str] = []
    clock = {"t": 0, "corr": 100, "dev": 0}

    def emit(name: str, children: list[Any], kernels: list[tuple[str, str]]) -> None:
        start = clock["t"]
        clock["t"] += 5
        for child in children:
            emit(*child)
        for kname, dur in kernels:
            corr = clock["corr"]
            clock["corr"] += 1
            events.append(f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,'
                          f'"ts":{clock["t"]},"dur":3,"args":{{"correlation":{corr}}}}}')
            clock["dev"] = max(clock["dev"], clock["t"] + 4)
            events.append(f'{{"ph":"X","cat":"kernel","name":"{kname}","pid":0,"tid":7,"ts":{clock["dev"]},'
                          f'"dur":{dur},"args":{{"correlation":{corr},"stream":7,"device":0}}}}')
            clock["dev"] += 200
            clock["t"] += 10
        clock["t"] += 5
        events.append(f'{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1,"tid":1,"ts":{start},'
                      f'"dur":{clock["t"] - start},"args":{{}}}}')
        clock["t"] += 2

    for op in ops:
        emit(*op)
    path.write_text('{"traceEvents":[' + ",".join(events) + "]}")
    return path


def ns(us: Decimal) -> int:
    return int(us * 1000)


def oracle(path: Path) -> dict[str, Any]:
    """From the file alone: kernels by name (calls, total ns), device total, and per op name its calls,
    self device (kernels whose launch sits innermost in it) and inclusive device (launch anywhere inside)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    dev_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    kernels: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in dev_cats:
            kernels[e["name"]][0] += 1
            kernels[e["name"]][1] += ns(Decimal(e["dur"]))
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    launch_ts = {e["args"]["correlation"]: Decimal(e["ts"]) for e in events if e.get("cat") == "cuda_runtime"}
    per_op: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "self": 0, "total": 0})
    for op in ops:
        per_op[op["name"]]["calls"] += 1
    for e in events:
        if e.get("cat") != "kernel":
            continue
        t = launch_ts.get(e.get("args", {}).get("correlation"))
        around = [] if t is None else [o for o in ops if Decimal(o["ts"]) <= t < Decimal(o["ts"]) + Decimal(o["dur"])]
        if not around:  # the ops half is only checked on this file's own traces, where every launch has an op
            continue
        for name in {o["name"] for o in around}:
            per_op[name]["total"] += ns(Decimal(e["dur"]))
        per_op[min(around, key=lambda o: Decimal(o["dur"]))["name"]]["self"] += ns(Decimal(e["dur"]))
    xs = [e for e in events if e.get("ph") == "X"]
    steps = sorted(ns(Decimal(e["dur"])) for e in xs
                   if e.get("cat") in ("user_annotation", "cpu_op") and str(e["name"]).startswith("ProfilerStep#"))
    span = max(ns(Decimal(e["ts"]) + Decimal(e["dur"])) for e in xs) - min(ns(Decimal(e["ts"])) for e in xs)
    return {"kernels": {k: tuple(v) for k, v in kernels.items()}, "device_total_ns": sum(v[1] for v in kernels.values()),
            "ops": dict(per_op), "span_ns": span, "step_ns": steps[(len(steps) - 1) // 2] if steps else None}


@pytest.fixture
def three_runs(tmp_path: Path, store: RunStore) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    ids, truth = {}, {}
    for name, ops in RUNS.items():
        path = write_trace(tmp_path / f"{name}.json", ops)
        ids[name] = ingest_paths(store, [path], name).id
        truth[name] = oracle(path)
    return ids, truth


def test_stored_runs_compare_against_the_tagged_baseline(store: RunStore, three_runs: tuple[
        dict[str, str], dict[str, dict[str, Any]]]) -> None:
    ids, truth = three_runs
    store.catalog.set_tags(ids["A"], ["before"])
    out = compute_run_compare(runs_of(store, [ids["B"], ids["A"], ids["C"]]))  # A is tagged: it is the baseline
    assert out["baseline"] == {"id": ids["A"], "reason": "tagged", "tag": "before"}
    order = ["A", "B", "C"]
    assert [r["id"] for r in out["runs"]] == [ids[n] for n in order]
    spans = [truth[n]["span_ns"] for n in order]  # no steps in these runs: the headline is the span
    assert out["headline"]["metric"] == "span_ns" and out["headline"]["totals_ns"] == spans
    assert out["headline"]["deltas_ns"] == [t - spans[0] for t in spans]
    totals = [truth[n]["device_total_ns"] for n in order]
    second = out["headline"]["secondary"]
    assert second is not None and second["metric"] == "device_total_ns" and second["totals_ns"] == totals
    assert second["deltas_ns"] == [t - totals[0] for t in totals]
    rows = {r["name"]: r for r in out["rows"]}
    assert set(rows) == {n for t in truth.values() for n in t["ops"]}
    zero = {"calls": 0, "self": 0, "total": 0}
    for name, row in rows.items():
        base = truth["A"]["ops"].get(name, zero)
        for run, v in zip(order[1:], row["vs_baseline"], strict=True):
            mine = truth[run]["ops"].get(name, zero)
            assert v["run"] == ids[run]
            assert (v["calls"], v["self_device_ns"], v["device_total_ns"]) == (
                mine["calls"] - base["calls"], mine["self"] - base["self"], mine["total"] - base["total"]), name
    assert [v["status"] for v in rows["only_mid"]["vs_baseline"]] == ["added", "absent"]
    assert [v["status"] for v in rows["aten::rsqrt"]["vs_baseline"]] == ["changed", "common"]
    assert rows["outer"]["vs_baseline"][0]["self_device_ns"] == 0 != rows["outer"]["vs_baseline"][0]["device_total_ns"]
    deltas = [max(abs(v["self_device_ns"]) for v in r["vs_baseline"]) for r in out["rows"]]
    assert deltas == sorted(deltas, reverse=True)
    check_kernels(out["kernels"], [truth[n]["kernels"] for n in order])


def check_kernels(kernels: dict[str, Any], truth: list[dict[str, tuple[int, int]]]) -> None:
    """The kernel diff equals the files' kernels by name, run by run against the first."""
    assert [(r["calls"], r["total_ns"]) for r in kernels["runs"]] == [
        (sum(c for c, _ in t.values()), sum(n for _, n in t.values())) for t in truth]
    rows = {r["name"]: r for r in kernels["rows"]}
    assert set(rows) == {k for t in truth for k in t}
    for name, row in rows.items():
        base = truth[0].get(name)
        for t, v in zip(truth[1:], row["vs_baseline"], strict=True):
            mine = t.get(name)
            expect = "absent" if base is None and mine is None else "added" if base is None else (
                "removed" if mine is None else "common" if mine[0] == base[0] else "changed")
            assert v["status"] == expect, name
            assert (v["calls"], v["total_ns"]) == ((mine or (0, 0))[0] - (base or (0, 0))[0],
                                                   (mine or (0, 0))[1] - (base or (0, 0))[1]), name


def test_kernel_diff_of_stored_runs(store: RunStore, three_runs: tuple[dict[str, str], dict[str, dict[str, Any]]]
                                    ) -> None:
    ids, truth = three_runs
    out = compute_run_compare(runs_of(store, [ids["C"], ids["B"]]))
    assert out["baseline"]["reason"] == "first"
    statuses = {r["name"]: r["status"] for r in out["kernels"]["rows"]}
    assert statuses == {"k_mul": "common", "k_rsqrt": "changed", "k_fused": "removed", "k_mid": "added"}
    check_kernels(out["kernels"], [truth["C"]["kernels"], truth["B"]["kernels"]])


@pytest.mark.shared
def test_kernel_diff_of_real_traces(shared_traces: Path, store: RunStore) -> None:
    folder = shared_traces / "HolisticTraceAnalysis" / "tests" / "data" / "trace_compare"
    paths = [folder / "base" / "base.json.gz", folder / "test" / "test.json.gz"]
    ids = [ingest_paths(store, [p], p.name).id for p in paths]
    out = compute_run_compare(runs_of(store, ids))
    truth = [oracle(p) for p in paths]
    assert out["headline"]["metric"] == "step_ns"  # two ProfilerSteps each: the lower median is the first
    assert out["headline"]["totals_ns"] == [t["step_ns"] for t in truth] == [100_298_000, 100_298_000]
    second = out["headline"]["secondary"]
    assert second is not None and second["totals_ns"] == [t["device_total_ns"] for t in truth]
    check_kernels(out["kernels"], [t["kernels"] for t in truth])


def runs_of(store: RunStore, ids: list[str]) -> list[Run]:
    return [Run.of(store, i) for i in ids]


def test_compare_refuses_one_run_or_a_repeated_one(store: RunStore, three_runs: tuple[
        dict[str, str], dict[str, dict[str, Any]]]) -> None:
    ids, _ = three_runs
    for bad in ([ids["A"]], [ids["A"], ids["A"]]):
        with pytest.raises(BadRequest):
            compute_run_compare(runs_of(store, bad))
