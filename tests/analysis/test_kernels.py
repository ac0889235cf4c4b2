"""The kernel table against independent readings: tiny named slice tables for the rules (percentiles,
categories, launch configs, rates, top ops) and real traces read with json + Decimal; and the lane
breakdown's hardware busy time, which must leave GPU annotations out."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from explorer.analysis.breakdown import compute_breakdown
from explorer.analysis.kernels import CATEGORY_RULES, categorize, compute_kernel_table, sort_kernel_rows
from explorer.errors import BadRequest
from explorer.model.tables import SLICES
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

HTA = "HolisticTraceAnalysis/tests/data/"
ALEXNET = HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
NCCL = HTA + "nccl_parser_config/nccl_data.json.gz"
ANNOTATED = HTA + "with_gpu_user_annotation/step_based_trace_2543932.json.gz"
MTIA = HTA + "mtia_inference_trace/mtia_inference_rank_0.json.gz"
AMD = HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events"}  # what executes on a device


def slices_table(rows: list[dict[str, Any]]) -> pa.Table:
    """A slices table from a few named rows; device executions unless said otherwise."""
    base = {"track_id": 0, "ts_ns": 0, "depth": 0, "parent_id": -1, "lane": "hardware", "correlation": -1,
            "external_id": -1, "op_id": -1, "is_op": False, "device_time": True, "shapes": "", "args": "{}"}
    full = [{**base, "slice_id": i, "ts_ns": 1000 * i, **r} for i, r in enumerate(rows)]
    return pa.Table.from_pylist(full, schema=SLICES)


def device_args(table: pa.Table) -> pa.ChunkedArray:
    return table.filter(table.column("device_time")).column("args")


def by_name(table: pa.Table) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in compute_kernel_table(table, device_args(table)).table.to_pylist()}


# ---- rules -------------------------------------------------------------------------------------

CATEGORY_CASES = [  # (name, event category, category, rule index that decides it)
    ("Memset (Device)", "gpu_memset", "memset", 0),
    ("Memset (Unknown)", "Memset", "memset", 0),
    ("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", "memcpy HtoD", 1),
    ("Memcpy HtoD (Host -> Device)", "gpu_memcpy", "memcpy HtoD", 1),
    ("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", "memcpy DtoH", 2),
    ("Memcpy DtoD (Device -> Device)", "Memcpy", "memcpy DtoD", 3),
    ("Memcpy PtoP (Device -> Device)", "gpu_memcpy", "memcpy PtoP", 4),
    ("Memcpy HtoH (Pinned -> Pinned)", "gpu_memcpy", "memcpy other", 5),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "kernel", "communication", 6),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", "communication", 6),
    ("rcclKernel_Broadcast_RING_SIMPLE", "kernel", "communication", 6),
    ("all_to_all_kernel<float>", "kernel", "communication", 7),
    ("ReduceScatter_bf16", "kernel", "communication", 7),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)",
     "kernel", "communication", 7),  # the general collective-name rule already catches symm_mem's
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::Signal*)", "kernel",
     "communication", 8),
    ("void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*, float*)", "kernel", "communication", 8),
    ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*)", "kernel", "communication", 8),
    ("nvshmemi_bfloat16_alltoall_kernel", "kernel", "communication", 8),
    ("cc_running", "neuron_hw", "communication", 9),
    ("dma_request", "mtia_ccp_events", "memcpy other", 10),
    ("void cutlass::EpilogueWithBroadcast<float>(float*)", "kernel", "compute", 11),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)", "Kernel",
     "compute", 11),
    ("nc_exec_running", "neuron_hw", "compute", 12),
    ("pe_exe", "mtia_ccp_events", "compute", 13),
    ("event_wait", "mtia_ccp_events", "other", 14),
    ("mystery", "some_device", "other", 14),
]


@pytest.mark.parametrize(("name", "cat", "expected", "rule"), CATEGORY_CASES)
def test_category_rule_rows(name: str, cat: str, expected: str, rule: int) -> None:
    got = categorize(pa.array([name]), pa.array([cat])).to_pylist()
    assert got == [expected]
    assert CATEGORY_RULES[rule].category == expected


def test_every_category_rule_has_a_test_row() -> None:
    assert {case[3] for case in CATEGORY_CASES} == set(range(len(CATEGORY_RULES)))


@pytest.mark.parametrize(("durations", "p50", "p95"), [
    ([4, 1, 3, 2], 2, 4),  # rank ceil(2) = 2, ceil(3.8) = 4
    ([7], 7, 7),
    (list(range(1, 101)), 50, 95),
    (list(range(20, 0, -1)), 10, 19),  # rank ceil(10) = 10, ceil(19) = 19
    ([5, 5, 9], 5, 9),
])
def test_nearest_rank_percentiles(durations: list[int], p50: int, p95: int) -> None:
    row = by_name(slices_table([{"name": "k", "cat": "kernel", "dur_ns": d} for d in durations]))["k"]
    assert (row["p50_ns"], row["p95_ns"]) == (p50, p95)
    assert (row["calls"], row["total_ns"], row["min_ns"], row["max_ns"]) == (
        len(durations), sum(durations), min(durations), max(durations))
    assert row["avg_ns"] == sum(durations) // len(durations)


def test_annotations_and_host_slices_are_not_kernels() -> None:
    table = slices_table([
        {"name": "k", "cat": "kernel", "dur_ns": 10},
        {"name": "ProfilerStep#1", "cat": "gpu_user_annotation", "dur_ns": 500, "device_time": False},
        {"name": "aten::mul", "cat": "cpu_op", "lane": "framework", "dur_ns": 900, "device_time": False},
        {"name": "m", "cat": "gpu_memset", "dur_ns": 30},
    ])
    kt = compute_kernel_table(table, device_args(table))
    assert kt.device_total_ns == 40
    assert sorted(kt.table.column("name").to_pylist()) == ["k", "m"]
    assert {r["name"]: r["device_pct"] for r in kt.table.to_pylist()} == {"k": 25.0, "m": 75.0}
    assert kt.categories == [{"category": "memset", "calls": 1, "total_ns": 30, "device_pct": 75.0},
                             {"category": "compute", "calls": 1, "total_ns": 10, "device_pct": 25.0}]


def test_a_run_without_device_executions_has_an_empty_table() -> None:
    table = slices_table([{"name": "aten::mul", "cat": "cpu_op", "dur_ns": 5, "device_time": False}])
    kt = compute_kernel_table(table, device_args(table))
    assert kt.table.num_rows == 0 and kt.device_total_ns == 0 and kt.categories == []
    assert sort_kernel_rows(kt.table) == []


def launch_args(grid: list[int], regs: int, **extra: Any) -> str:
    return json.dumps({"correlation": 1, "grid": grid, "block": [128, 1, 1], "registers per thread": regs,
                       "shared memory": 256, "est. achieved occupancy %": 50, **extra})


def test_launch_reports_the_most_common_config_and_rates() -> None:
    table = slices_table([
        {"name": "k", "cat": "kernel", "dur_ns": 100, "args": launch_args([4, 1, 1], 32, kernel_flop=2_000)},
        {"name": "k", "cat": "kernel", "dur_ns": 300, "args": launch_args([4, 1, 1], 32, kernel_flop=4_000)},
        {"name": "k", "cat": "kernel", "dur_ns": 900, "args": launch_args([8, 1, 1], 40)},
        {"name": "t", "cat": "kernel", "dur_ns": 200, "args": json.dumps({"kernel_num_gb": 0.5, "kernel_flop": 7})},
        {"name": "t", "cat": "kernel", "dur_ns": 300, "args": json.dumps({"kernel_num_gb": 0.25})},
        {"name": "c", "cat": "gpu_memcpy", "dur_ns": 40, "args": json.dumps({"bytes": 1000})},
        {"name": "c", "cat": "gpu_memcpy", "dur_ns": 60, "args": "not json"},
        {"name": "none", "cat": "kernel", "dur_ns": 1},
    ])
    rows = by_name(table)
    k = rows["k"]["launch"]
    assert (k["grid"], k["block"], k["registers_per_thread"], k["shared_memory"]) == ([4, 1, 1], [128, 1, 1], 32, 256)
    assert (k["est_occupancy_pct"], k["configs"], k["config_calls"]) == (50.0, 2, 2)
    assert k["kernel_flop"] == 6_000 and k["flop_per_s"] == pytest.approx(6_000 / 400e-9)  # calls with flop only
    t = rows["t"]["launch"]
    assert t["kernel_num_gb"] == pytest.approx(0.75) and t["gb_per_s"] == pytest.approx(0.75 / 500e-9)
    assert t["flop_per_s"] == pytest.approx(7 / 200e-9) and t["grid"] is None and t["configs"] is None
    c = rows["c"]["launch"]
    assert c["bytes"] == 1000 and c["gb_per_s"] == pytest.approx(1000 / 40)  # bytes per ns = GB/s
    assert rows["none"]["launch"] is None


def test_launch_tie_goes_to_the_config_with_more_time() -> None:
    table = slices_table([
        {"name": "k", "cat": "kernel", "dur_ns": 10, "args": launch_args([1, 1, 1], 8)},
        {"name": "k", "cat": "kernel", "dur_ns": 20, "args": launch_args([2, 1, 1], 8)},
    ])
    assert by_name(table)["k"]["launch"]["grid"] == [2, 1, 1]


def test_top_ops_by_time_with_profiler_steps_merged() -> None:
    ops = [{"name": n, "cat": "cpu_op", "lane": "framework", "dur_ns": 1, "device_time": False, "is_op": True}
           for n in ("ProfilerStep#1", "ProfilerStep#2", "aten::a", "aten::b", "aten::c")]
    kernels = [{"name": "k", "cat": "kernel", "dur_ns": d, "op_id": op} for op, d in
               [(0, 5), (1, 5), (2, 7), (3, 3), (4, 3), (-1, 100)]]
    row = by_name(slices_table(ops + kernels))["k"]
    assert row["top_ops"] == [{"name": "ProfilerStep*", "total_ns": 10}, {"name": "aten::a", "total_ns": 7},
                              {"name": "aten::b", "total_ns": 3}]
    assert row["total_ns"] == 123


def test_sort_filter_and_category() -> None:
    table = slices_table([{"name": "Big", "cat": "kernel", "dur_ns": 50}, {"name": "small", "cat": "kernel",
                                                                          "dur_ns": 5},
                          {"name": "Memset (Device)", "cat": "gpu_memset", "dur_ns": 20}])
    kt = compute_kernel_table(table, device_args(table)).table
    assert [r["name"] for r in sort_kernel_rows(kt)] == ["Big", "Memset (Device)", "small"]
    assert [r["name"] for r in sort_kernel_rows(kt, "name")] == ["Big", "Memset (Device)", "small"]
    assert [r["name"] for r in sort_kernel_rows(kt, "-name")] == ["small", "Memset (Device)", "Big"]
    assert [r["name"] for r in sort_kernel_rows(kt, "+total_ns", limit=1)] == ["small"]
    assert [r["name"] for r in sort_kernel_rows(kt, q="B")] == ["Big"]
    assert [r["name"] for r in sort_kernel_rows(kt, category="memset")] == ["Memset (Device)"]
    with pytest.raises(BadRequest):
        sort_kernel_rows(kt, "-bogus")


# ---- real traces -------------------------------------------------------------------------------

def read_events(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    return [e for e in doc["traceEvents"] if isinstance(e, dict)]


def ns(us: Any) -> int:
    value = Decimal(str(us)) * 1000
    assert value == value.to_integral_value()
    return int(value)


def executions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in DEVICE_CATS]


def nearest_rank(values: list[int], p: int) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(Decimal(p) * len(ordered) / 100)) - 1]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> dict[str, tuple[RunStore, str]]:
    store = RunStore(tmp_path_factory.mktemp("kernels") / "data")
    return {rel: (store, ingest_paths(store, [shared_traces / rel]).id) for rel in (ALEXNET, NCCL, ANNOTATED, MTIA, AMD)}


def kernel_table_of(store: RunStore, run_id: str) -> Any:
    args = pq.read_table(store.table_path(run_id, "slices"), columns=["args"],
                         filters=[("device_time", "=", True)]).column("args")
    return compute_kernel_table(store.table(run_id, "slices"), args)


@pytest.mark.shared
@pytest.mark.parametrize("rel", [ALEXNET, NCCL, ANNOTATED, MTIA, AMD])
def test_kernel_stats_match_the_file(rel: str, ingested: dict[str, tuple[RunStore, str]], shared_traces: Path) -> None:
    durations: dict[str, list[int]] = defaultdict(list)
    for e in executions(read_events(shared_traces / rel)):
        durations[e["name"]].append(ns(e["dur"]))
    kt = kernel_table_of(*ingested[rel])
    rows = {r["name"]: r for r in kt.table.to_pylist()}
    assert set(rows) == set(durations)
    assert kt.device_total_ns == sum(sum(v) for v in durations.values())
    for name, values in durations.items():
        r = rows[name]
        assert (r["calls"], r["total_ns"], r["min_ns"], r["max_ns"]) == (len(values), sum(values), min(values),
                                                                         max(values)), name
        assert (r["p50_ns"], r["p95_ns"]) == (nearest_rank(values, 50), nearest_rank(values, 95)), name
        assert r["device_pct"] == pytest.approx(float(Decimal(100) * sum(values) / kt.device_total_ns))
    assert sum(c["total_ns"] for c in kt.categories) == kt.device_total_ns


@pytest.mark.shared
@pytest.mark.parametrize("rel", [ALEXNET, NCCL])
def test_categories_follow_the_event_names(rel: str, ingested: dict[str, tuple[RunStore, str]],
                                           shared_traces: Path) -> None:
    expected: dict[str, str] = {}
    for e in executions(read_events(shared_traces / rel)):
        name, cat = e["name"], e["cat"]
        if cat == "gpu_memcpy":  # "Memcpy DtoD (Device -> Device)": the second word is the kind
            expected[name] = "memcpy " + name.split()[1]
        elif cat == "gpu_memset":
            expected[name] = "memset"
        else:
            expected[name] = "communication" if name.startswith("ncclKernel_") else "compute"
    rows = {r["name"]: r["category"] for r in kernel_table_of(*ingested[rel]).table.to_pylist()}
    assert rows == expected
    assert len(set(expected.values())) >= 3


@pytest.mark.shared
@pytest.mark.parametrize("rel", [ALEXNET, NCCL, ANNOTATED])
def test_launch_config_matches_the_file(rel: str, ingested: dict[str, tuple[RunStore, str]],
                                        shared_traces: Path) -> None:
    configs: dict[str, Counter[tuple[Any, ...]]] = defaultdict(Counter)
    for e in executions(read_events(shared_traces / rel)):
        a = e["args"]
        if "grid" in a:
            configs[e["name"]][(tuple(a["grid"]), tuple(a["block"]), a["registers per thread"], a["shared memory"],
                                a["est. achieved occupancy %"])] += 1
    rows = {r["name"]: r for r in kernel_table_of(*ingested[rel]).table.to_pylist()}
    checked = 0
    for name, counts in configs.items():
        (best, n), *rest = counts.most_common()
        launch = rows[name]["launch"]
        assert (launch["configs"], launch["config_calls"]) == (len(counts), n), name
        if rest and rest[0][1] == n:
            continue  # a tie: decided by time, not checked here
        got = (tuple(launch["grid"]), tuple(launch["block"]), launch["registers_per_thread"], launch["shared_memory"],
               launch["est_occupancy_pct"])
        assert got == best, name
        checked += 1
    assert checked >= 5


def launching_ops(events: list[dict[str, Any]]) -> dict[Any, str]:
    """correlation -> name of the innermost op (cpu_op / user_annotation) around the runtime call with
    that correlation on the same thread (a stack sweep in start order): the op that launched it."""
    per_thread: dict[tuple[Any, Any], list[tuple[int, int, int, str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("ph") != "X":
            continue
        start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        if e.get("cat") in ("cpu_op", "user_annotation"):
            per_thread[(e["pid"], e["tid"])].append((start, 0, -end, e["name"], None))
        elif e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]:
            per_thread[(e["pid"], e["tid"])].append((start, 1, -end, "", e["args"]["correlation"]))
    out: dict[Any, str] = {}
    for items in per_thread.values():
        stack: list[tuple[int, str]] = []  # (end, name) of the ops open at the sweep point
        for start, kind, neg_end, name, corr in sorted(items, key=lambda t: t[:3]):
            while stack and stack[-1][0] <= start:
                stack.pop()
            if kind == 0:
                stack.append((-neg_end, name))
                continue
            around = [op for op_end, op in stack if op_end >= -neg_end]
            if around:
                out[corr] = around[-1]
    return out


@pytest.mark.shared
@pytest.mark.parametrize("rel", [NCCL, AMD, ALEXNET])
def test_top_ops_match_the_file(rel: str, ingested: dict[str, tuple[RunStore, str]], shared_traces: Path) -> None:
    events = read_events(shared_traces / rel)
    op_of = launching_ops(events)
    per_op: dict[str, Counter[str]] = defaultdict(Counter)
    for e in executions(events):
        op = op_of.get(e["args"].get("correlation"))
        if op is not None:
            per_op[e["name"]]["ProfilerStep*" if op.startswith("ProfilerStep#") else op] += ns(e["dur"])
    rows = {r["name"]: r for r in kernel_table_of(*ingested[rel]).table.to_pylist()}
    assert len(per_op) >= 5
    for name, totals in per_op.items():
        top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        assert rows[name]["top_ops"] == [{"name": op, "total_ns": t} for op, t in top], name


@pytest.mark.shared
def test_memcpy_bytes_and_bandwidth_match_the_file(ingested: dict[str, tuple[RunStore, str]],
                                                   shared_traces: Path) -> None:
    moved: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in executions(read_events(shared_traces / ALEXNET)):
        if e["cat"] in ("gpu_memcpy", "gpu_memset"):
            moved[e["name"]][0] += int(e["args"]["bytes"])
            moved[e["name"]][1] += ns(e["dur"])
    rows = {r["name"]: r for r in kernel_table_of(*ingested[ALEXNET]).table.to_pylist()}
    assert moved
    for name, (nbytes, dur) in moved.items():
        assert rows[name]["launch"]["bytes"] == nbytes
        assert rows[name]["launch"]["gb_per_s"] == pytest.approx(float(Decimal(nbytes) / dur))


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start  # type: ignore[operator]
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + (cur_end - cur_start if cur_end is not None else 0)  # type: ignore[operator]


@pytest.mark.shared
def test_hardware_busy_excludes_gpu_annotations(ingested: dict[str, tuple[RunStore, str]],
                                                shared_traces: Path) -> None:
    events = [e for e in read_events(shared_traces / ANNOTATED) if e.get("ph") == "X"]
    execs = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in executions(events)]
    notes = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events if e.get("cat") == "gpu_user_annotation"]
    assert notes and union_ns(execs + notes) > union_ns(execs)  # the annotations would change the answer
    store, run_id = ingested[ANNOTATED]
    s = store.get(run_id).summary
    t = store.table
    bd = compute_breakdown(t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "flows"), s.start_ns, s.end_ns)
    hw = next(r for r in bd["lanes"] if r["lane"] == "hardware")
    assert hw["busy_ns"] == union_ns(execs)
    assert (hw["slices"], hw["excluded_slices"]) == (len(execs), len(notes))
    assert hw["busy_pct"] == pytest.approx(100 * union_ns(execs) / (s.end_ns - s.start_ns))
    (device,) = bd["devices"]  # one GPU: the lane and the device now tell the same story
    assert device["busy_ns"] == hw["busy_ns"]
