"""The op table's memory columns on real torch.profiler(profile_memory=True, record_shapes=True, with_stack=True)
captures: net bytes equal torch's own key_averages() (cpu_memory_usage, self_cpu_memory_usage, per name and per
input shape), allocated bytes, counts and peak contribution equal a plain json reading of the file, and the self
columns sum to the memory page's totals."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.memory import compute_run_memory
from explorer.views.ops import OpsQuery, build_ops_page, compute_run_ops
from tests.helpers.memory_profiles import OpIndex, live_at_peak, read_trace, row_name, train_profile_apart

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
