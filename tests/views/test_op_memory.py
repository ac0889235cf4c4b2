"""The op table's memory columns on real torch.profiler(profile_memory=True, record_shapes=True, with_stack=True)
captures: net bytes equal torch's own key_averages() (cpu_memory_usage, self_cpu_memory_usage, per name and per
input shape), allocated bytes, counts and peak contribution equal a plain json reading of the file, and the self
columns sum to the memory page's totals. Rows by nn.Module (a with_modules capture), a time range, a rank and a
chosen device are read from the files the same way (the ranks from a constructed two-rank trace)."""

from __future__ import annotations

from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.errors import BadRequest
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.memory import compute_run_memory
from explorer.views.ops import OpsQuery, build_ops_page, compute_run_ops
from tests.helpers.memory_profiles import (
    OpIndex,
    live_at_peak,
    module_path_of,
    module_profile,
    read_trace,
    row_name,
    train_profile_apart,
    write_rank_memory_traces,
)

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("op_memory") / "leak8.json"
    return path, train_profile_apart(path, 8, leak=True)


def ops(store: RunStore, path: Path, **kw: Any) -> dict[str, Any]:
    rec = ingest_paths(store, [path])
    return dict(compute_run_ops(Run.of(store, rec.id), OpsQuery(view="all", **kw))) | {"run_id": rec.id}


def test_net_bytes_equal_key_averages(store: RunStore, leaky: tuple[Path, dict[str, Any]]) -> None:
    path, torch_rows = leaky
    rows = ops(store, path)["rows"]
    assert {r["name"]: (r["net_bytes"], r["self_net_bytes"], r["calls"]) for r in rows} == torch_rows["by_name"]
    assert any(r["self_net_bytes"] for r in rows)


def test_net_bytes_by_input_shape_equal_key_averages(store: RunStore, leaky: tuple[Path, dict[str, Any]]) -> None:
    """Per name, the (net, self net, calls) of its shape rows are torch's group_by_input_shape rows."""
    path, torch_rows = leaky
    got: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for r in ops(store, path, by_shape=True)["rows"]:
        got[r["name"]].append((r["net_bytes"], r["self_net_bytes"], r["calls"]))
    assert {k: sorted(v) for k, v in got.items()} == torch_rows["by_shape"]


def test_allocated_counts_and_peak_equal_the_file(store: RunStore, leaky: tuple[Path, dict[str, Any]]) -> None:
    """Allocated bytes and counts under each op (closed interval on its thread) and directly (the innermost op),
    and the bytes of each op's own allocations live at the peak, read from the file with json + decimal."""
    path, _ = leaky
    mem, xs, _ = read_trace(path)
    index = OpIndex(xs)
    total: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    count: Counter[str] = Counter()
    at_peak: Counter[str] = Counter()
    _, live = live_at_peak(mem)
    for k, e in enumerate(mem):
        nbytes = e["args"]["Bytes"]
        if nbytes <= 0:
            continue
        for x in index.holding(e):
            total[row_name(x["name"])] += nbytes
            count[row_name(x["name"])] += 1
        if (inner := index.innermost(e)) is not None:
            self_[row_name(inner["name"])] += nbytes
            at_peak[row_name(inner["name"])] += nbytes if k in live else 0
    rows = {r["name"]: r for r in ops(store, path)["rows"]}
    assert {n: r["allocated_bytes"] for n, r in rows.items() if r["allocated_bytes"]} == +total
    assert {n: r["allocations"] for n, r in rows.items() if r["allocations"]} == +count
    assert {n: r["self_allocated_bytes"] for n, r in rows.items() if r["self_allocated_bytes"]} == +self_
    assert {n: r["self_peak_bytes"] for n, r in rows.items() if r["self_peak_bytes"]} == +at_peak
    assert rows["aten::cumsum"]["self_allocated_bytes"] == 3 * 64 * 256 * 4  # the leaked tensor, once a step


def test_self_columns_sum_to_the_memory_page(store: RunStore, leaky: tuple[Path, dict[str, Any]]) -> None:
    path, _ = leaky
    data = ops(store, path)
    summary = data["memory"]
    report = compute_run_memory(store, data["run_id"])["report"]
    assert report is not None
    [peak] = report["peaks"]
    mem, _, _ = read_trace(path)
    allocated = sum(e["args"]["Bytes"] for e in mem if e["args"]["Bytes"] > 0)
    assert summary["device"] == "CPU" and summary["peak_bytes"] == peak["bytes"]
    assert allocated == summary["allocated_bytes"] == sum(r["bytes"] for r in report["top_owners"])
    assert summary["allocations"] == report["allocations"]
    rows = data["rows"]
    assert sum(r["self_allocated_bytes"] for r in rows) + summary["outside_allocated_bytes"] == allocated
    assert sum(r["self_peak_bytes"] for r in rows) + summary["outside_peak_bytes"] == peak["bytes"]
    # what no op explains at the peak is the page's (allocated before the profile) plus (no op)
    unowned = {r["owner"]: r["bytes"] for r in peak["by_owner"]}
    assert summary["outside_peak_bytes"] == unowned.get("(allocated before the profile)", 0) + unowned.get("(no op)", 0)


def test_sorted_by_a_memory_column(store: RunStore, leaky: tuple[Path, dict[str, Any]]) -> None:
    path, _ = leaky
    data = ops(store, path, sort="-self_allocated_bytes", limit=5)
    got = [r["self_allocated_bytes"] for r in data["rows"]]
    assert len(got) == 5 and got == sorted(got, reverse=True) and got[0] > 0
    page = build_ops_page(Run.of(store, data["run_id"]), OpsQuery(sort="-self_peak_bytes"))
    assert page.memory is not None and page.memory["device"] == "CPU"
    assert page.rows[0]["self_peak_bytes"] == max(r["self_peak_bytes"] for r in page.rows)


def test_a_run_without_memory_events_has_no_columns(store: RunStore) -> None:
    data = ops(store, Path(__file__).resolve().parents[1] / "api" / "fixtures" / "tiny_kineto.json")
    assert "memory" not in data and all("allocated_bytes" not in r for r in data["rows"])


def test_shared_cpu_trace(store: RunStore, shared_traces: Path) -> None:
    """A public torch.profiler capture (CPU, profile_memory): allocated bytes, counts and self bytes per name
    equal a plain reading of the file, and the self column sums to the memory page's total."""
    path = shared_traces / "dtu_mlops" / "trace.json"
    mem, xs, _ = read_trace(path)
    index = OpIndex(xs)
    total: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    for e in mem:
        if (nbytes := e["args"]["Bytes"]) > 0:
            for x in index.holding(e):
                total[row_name(x["name"])] += nbytes
            if (inner := index.innermost(e)) is not None:
                self_[row_name(inner["name"])] += nbytes
    data = ops(store, path)
    rows = data["rows"]
    assert {r["name"]: r["allocated_bytes"] for r in rows if r["allocated_bytes"]} == +total
    assert {r["name"]: r["self_allocated_bytes"] for r in rows if r["self_allocated_bytes"]} == +self_
    allocated = sum(e["args"]["Bytes"] for e in mem if e["args"]["Bytes"] > 0)
    assert sum(r["self_allocated_bytes"] for r in rows) + data["memory"]["outside_allocated_bytes"] == allocated


def file_truth(mem: list[dict[str, Any]], xs: list[dict[str, Any]], rel_ns: Any = None, window: tuple[int, int] | None = None,
               by_module: bool = False) -> dict[str, Any]:
    """Per row key (module, name) the memory columns read from the file: allocations (Bytes > 0) of `mem` (one
    device, time order) inside `window` ([start, end) relative ns, `rel_ns(event)` the relative ns), under ops that
    start inside it (closed intervals) and directly (the innermost op, counted when it starts inside); of those
    live at the window's peak (its first event at the highest Total Allocated), the bytes."""
    index = OpIndex(xs)
    module = module_path_of(xs) if by_module else {}

    def inside(e: dict[str, Any]) -> bool:
        return window is None or window[0] <= rel_ns(e) < window[1]

    win = [k for k, e in enumerate(mem) if inside(e)]
    at, live = live_at_peak(mem, win)
    at_peak_set = live & set(win)
    out: dict[str, Counter[tuple[str, str]]] = {c: Counter() for c in ("allocated_bytes", "allocations",
                                                                        "self_allocated_bytes", "self_peak_bytes")}

    def key(x: dict[str, Any]) -> tuple[str, str]:
        return module.get(id(x), ""), row_name(x["name"])

    for k in win:
        e = mem[k]
        if (nbytes := e["args"]["Bytes"]) <= 0:
            continue
        for x in index.holding(e):
            if inside(x):
                out["allocated_bytes"][key(x)] += nbytes
                out["allocations"][key(x)] += 1
        if (inner := index.innermost(e)) is not None and inside(inner):
            out["self_allocated_bytes"][key(inner)] += nbytes
            out["self_peak_bytes"][key(inner)] += nbytes if k in at_peak_set else 0
    return {"columns": {c: +v for c, v in out.items()}, "peak_bytes": mem[at]["args"]["Total Allocated"],
            "allocated_bytes": sum(mem[k]["args"]["Bytes"] for k in win if mem[k]["args"]["Bytes"] > 0)}


def explorer_columns(data: dict[str, Any]) -> dict[str, dict[tuple[str, str], int]]:
    return {c: {(r.get("module", ""), r["name"]): r[c] for r in data["rows"] if r[c]}
            for c in ("allocated_bytes", "allocations", "self_allocated_bytes", "self_peak_bytes")}


def assert_sums(data: dict[str, Any], truth: dict[str, Any]) -> None:
    """The self columns plus what no op explains are the totals (of the device, in the window)."""
    summary = data["memory"]
    assert summary["peak_bytes"] == truth["peak_bytes"] and summary["allocated_bytes"] == truth["allocated_bytes"]
    rows = data["rows"]
    assert sum(r["self_allocated_bytes"] for r in rows) + summary["outside_allocated_bytes"] == truth["allocated_bytes"]
    assert sum(r["self_peak_bytes"] for r in rows) + summary["outside_peak_bytes"] == truth["peak_bytes"]
    assert summary["outside_peak_bytes"] >= 0 and summary["outside_allocated_bytes"] >= 0


@pytest.fixture(scope="module")
def modules_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("op_memory_modules") / "modules.json"
    module_profile(path)
    return path


def test_module_rows_equal_the_file(store: RunStore, modules_trace: Path) -> None:
    """Grouped by nn.Module, each (module path, name) row's allocations are its ops' (the path as the file's
    enclosing `nn.Module: ` frames give it)."""
    mem, xs, _ = read_trace(modules_trace)
    truth = file_truth(mem, xs, by_module=True)
    data = ops(store, modules_trace, by_module=True)
    assert explorer_columns(data) == truth["columns"]
    assert any(m.startswith("Net_0/") for m, _ in truth["columns"]["self_allocated_bytes"])  # nested paths
    assert_sums(data, truth)
    run = Run.of(store, data["run_id"])
    top = compute_run_ops(run, OpsQuery(view="all", by_module=True, sort="-self_allocated_bytes", limit=3))["rows"]
    assert [r["self_allocated_bytes"] for r in top] == sorted(truth["columns"]["self_allocated_bytes"].values(),
                                                              reverse=True)[:3]


def test_time_range_equals_the_file(store: RunStore, leaky: tuple[Path, dict[str, Any]]) -> None:
    """Restricted to [start_ns, end_ns) (the second active step's first half): the allocations made there by the
    ops that start there, and their bytes live at the peak inside the range."""
    path, _ = leaky
    mem, xs, base = read_trace(path)
    data = ops(store, path)
    origin = Run.of(store, data["run_id"]).origin_ns

    def rel_ns(e: dict[str, Any]) -> int:
        ns = Decimal(e["ts"]) * 1000 + base - origin
        assert ns == ns.to_integral_value()
        return int(ns)

    steps = sorted((x for x in xs if x["name"].startswith("ProfilerStep#")), key=lambda x: Decimal(x["ts"]))
    lo = rel_ns(steps[1])
    hi = lo + int(Decimal(steps[1]["dur"]) * 1000) // 2
    for by_module in (True, False):  # (with_stack writes the nn.Module frames here too)
        truth = file_truth(mem, xs, rel_ns, (lo, hi), by_module)
        got = ops(store, path, start_ns=lo, end_ns=hi, by_module=by_module)
        assert explorer_columns(got) == truth["columns"]
        assert_sums(got, truth)
    assert truth["peak_bytes"] < data["memory"]["peak_bytes"] or truth["columns"] != explorer_columns(data)
    got = ops(store, path, start_ns=lo, end_ns=hi, sort="-self_peak_bytes", limit=2)
    assert [r["self_peak_bytes"] for r in got["rows"]] == sorted(truth["columns"]["self_peak_bytes"].values(),
                                                                  reverse=True)[:2]


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_rank_memory_traces(tmp_path_factory.mktemp("op_memory_ranks"))


def device_events(path: Path, device_type: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    mem, xs, _ = read_trace(path)
    return [e for e in mem if e["args"]["Device Type"] == device_type], xs


def test_rank_filter_and_memory_device(store: RunStore, rank_files: list[Path]) -> None:
    """A constructed run of two ranks: `rank=R` counts that rank's events (its file's), per device; with every
    rank, each rank's allocators are apart (`CUDA 0 (rank 1)`) and the default is the highest peak."""
    rec = ingest_paths(store, rank_files)
    run = Run.of(store, rec.id)
    for rank, path in enumerate(rank_files):
        for device, device_type in (("CPU", 0), ("CUDA 0", 1)):
            truth = file_truth(*device_events(path, device_type))
            data = dict(compute_run_ops(run, OpsQuery(view="all", rank=str(rank), memory_device=device)))
            assert data["memory"]["device"] == device and data["memory"]["devices"] == ["CPU", "CUDA 0"]
            assert explorer_columns(data) == truth["columns"]
            assert_sums(data, truth)
        default = compute_run_ops(run, OpsQuery(view="all", rank=str(rank)))
        assert default.get("memory", {}).get("device") == "CUDA 0"  # its highest peak
    whole = dict(compute_run_ops(run, OpsQuery(view="all")))
    assert whole["memory"]["devices"] == ["CPU (rank 0)", "CPU (rank 1)", "CUDA 0 (rank 0)", "CUDA 0 (rank 1)"]
    assert whole["memory"]["device"] == "CUDA 0 (rank 1)"
    truth = file_truth(*device_events(rank_files[1], 1))
    assert explorer_columns(whole) == truth["columns"]
    chosen = dict(compute_run_ops(run, OpsQuery(view="all", memory_device="CPU (rank 0)")))
    assert explorer_columns(chosen) == file_truth(*device_events(rank_files[0], 0))["columns"]
    for bad in (OpsQuery(memory_device="CUDA 1"), OpsQuery(rank="0", memory_device="CUDA 0 (rank 0)")):
        with pytest.raises(BadRequest, match="memory_device"):
            compute_run_ops(run, bad)


def test_memory_device_on_a_run_without_events(store: RunStore) -> None:
    rec = ingest_paths(store, [Path(__file__).resolve().parents[1] / "api" / "fixtures" / "tiny_kineto.json"])
    with pytest.raises(BadRequest, match="no \\[memory\\] events"):
        compute_run_ops(Run.of(store, rec.id), OpsQuery(memory_device="CPU"))
