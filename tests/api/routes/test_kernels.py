"""GET /api/runs/{id}/kernels and the /runs/{id}/kernels page: numbers against an independent reading of
the synthetic trace, sort / filter / category options, errors, the page context equal to its JSON twin,
hostile names escaped, the host-only empty state, and the report's kernel section."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.report.html import build_report
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.views.kernels import KernelsPage
from tests.api.conftest import assert_error
from tests.helpers.kernel_trace import (
    DTOH,
    GEMM_KERNEL,
    HOSTILE_KERNEL,
    HTOD,
    MEMSET,
    MUL_KERNEL,
    NCCL_KERNEL,
    TRITON_KERNEL,
    host_only_trace,
    write_kernel_trace,
)

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    tmp = tmp_path_factory.mktemp("kernels")
    trace = write_kernel_trace(tmp / "kernels.json")
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    runs = {"gpu": ingest_paths(store, [trace], "gpu").id,
            "host": ingest_paths(store, [host_only_trace(tmp / "host.json")], "host").id}
    with TestClient(app) as client:
        yield client, runs, trace


def file_executions(trace: Path) -> dict[str, list[dict[str, Any]]]:
    """Device executions of the trace file by name, times as Decimal µs."""
    doc = json.loads(trace.read_text(), parse_float=Decimal)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            out[e["name"]].append(e)
    return out


def ns(us: Any) -> int:
    return int(Decimal(str(us)) * 1000)


def test_kernels_shape_and_numbers(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, trace = served
    body = client.get(f"/api/runs/{runs['gpu']}/kernels").json()
    assert set(body) == {"rows", "device_total_ns", "categories", "rates"}
    execs = file_executions(trace)
    total = sum(ns(e["dur"]) for events in execs.values() for e in events)
    assert body["device_total_ns"] == total
    rows = {r["name"]: r for r in body["rows"]}
    assert set(rows) == set(execs)
    for name, events in execs.items():
        durations = sorted(ns(e["dur"]) for e in events)
        r = rows[name]
        assert set(r) == {"name", "category", "calls", "total_ns", "avg_ns", "min_ns", "max_ns", "p50_ns", "p95_ns",
                          "device_pct", "top_ops", "launch", "work"}
        assert (r["calls"], r["total_ns"], r["min_ns"], r["max_ns"]) == (
            len(durations), sum(durations), durations[0], durations[-1])
        assert (r["p50_ns"], r["p95_ns"]) == (durations[1], durations[2])  # 3 calls: ranks ceil(1.5), ceil(2.85)
        assert r["device_pct"] == pytest.approx(100 * sum(durations) / total)
    assert [r["total_ns"] for r in body["rows"]] == sorted((r["total_ns"] for r in body["rows"]), reverse=True)
    expected = {MUL_KERNEL: "compute", GEMM_KERNEL: "compute", TRITON_KERNEL: "compute", HOSTILE_KERNEL: "compute",
                NCCL_KERNEL: "communication", HTOD: "memcpy HtoD", DTOH: "memcpy DtoH", MEMSET: "memset"}
    assert {n: r["category"] for n, r in rows.items()} == expected
    per_category: dict[str, int] = defaultdict(int)
    for name, events in execs.items():
        per_category[expected[name]] += sum(ns(e["dur"]) for e in events)
    assert {c["category"]: c["total_ns"] for c in body["categories"]} == per_category


def test_kernels_top_ops_and_launch(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, trace = served
    rows = {r["name"]: r for r in client.get(f"/api/runs/{runs['gpu']}/kernels").json()["rows"]}
    execs = file_executions(trace)
    gemm = rows[GEMM_KERNEL]
    assert gemm["top_ops"] == [{"name": "aten::addmm", "total_ns": sum(ns(e["dur"]) for e in execs[GEMM_KERNEL])}]
    assert gemm["launch"]["grid"] == [16, 8, 1] and gemm["launch"]["shared_memory"] == 49152
    assert gemm["launch"]["configs"] == 1 and gemm["launch"]["config_calls"] == 3
    triton = rows[TRITON_KERNEL]["launch"]
    flop = sum(int(e["args"]["kernel_flop"]) for e in execs[TRITON_KERNEL])
    gb = sum(Decimal(e["args"]["kernel_num_gb"]) for e in execs[TRITON_KERNEL])
    dur = sum(ns(e["dur"]) for e in execs[TRITON_KERNEL])
    assert triton["kernel_flop"] == flop
    assert triton["flop_per_s"] == pytest.approx(float(Decimal(flop) * 10**9 / dur))
    assert triton["gb_per_s"] == pytest.approx(float(gb * 10**9 / dur))
    htod = rows[HTOD]["launch"]
    nbytes = sum(int(e["args"]["bytes"]) for e in execs[HTOD])
    assert htod["bytes"] == nbytes and htod["gb_per_s"] == pytest.approx(nbytes / sum(ns(e["dur"]) for e in
                                                                                     execs[HTOD]))


@pytest.mark.parametrize(("query", "names"), [
    ("?sort=%2Bname&limit=3", sorted([HOSTILE_KERNEL, DTOH, HTOD, MEMSET, NCCL_KERNEL, MUL_KERNEL, GEMM_KERNEL,
                                       TRITON_KERNEL])[:3]),
    ("?q=MEMCPY", [HTOD, DTOH]),
    ("?category=memset", [MEMSET]),
    ("?category=communication&q=nccl", [NCCL_KERNEL]),
    ("?sort=-max_ns&limit=2", [NCCL_KERNEL, GEMM_KERNEL]),
    ("?sort=%2Bp95_ns&limit=1", [MEMSET]),
])
def test_kernels_sort_filter_category(served: tuple[TestClient, dict[str, str], Path], query: str,
                                      names: list[str]) -> None:
    client, runs, _ = served
    body = client.get(f"/api/runs/{runs['gpu']}/kernels{query}").json()
    assert [r["name"] for r in body["rows"]] == names
    assert sum(c["total_ns"] for c in body["categories"]) == body["device_total_ns"]  # never filtered


def test_kernels_errors(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = served
    assert_error(client.get("/api/runs/nope/kernels"), 404, "run_not_found")
    assert_error(client.get(f"/api/runs/{runs['gpu']}/kernels?sort=bogus"), 400, "bad_request")
    assert_error(client.get(f"/api/runs/{runs['gpu']}/kernels?category=gpu"), 400, "bad_request")
    assert client.get(f"/runs/{runs['gpu']}/kernels?sort=bogus").status_code == 400
    assert client.get("/runs/nope/kernels").status_code == 404


@pytest.mark.parametrize("query", ["", "?sort=-calls", "?sort=%2Bname", "?q=kernel&sort=p50_ns", "?category=memset",
                                   "?limit=2"])
def test_kernels_page_context_equals_its_twin(served: tuple[TestClient, dict[str, str], Path], query: str) -> None:
    client, runs, _ = served
    resp = client.get(f"/runs/{runs['gpu']}/kernels{query}")
    assert resp.status_code == 200, resp.text[:300]
    page = resp.context["page"]
    assert isinstance(page, KernelsPage)
    twin = client.get(page.twin).json()
    assert {"rows": page.rows, "device_total_ns": page.device_total_ns, "categories": page.categories,
            "rates": page.rates} == twin
    assert page.twin.replace("&", "&amp;") in resp.text
    assert 'id="tab-kernels"' in resp.text and 'class="on" id="tab-kernels"' in resp.text


def test_kernels_page_sort_links_and_whole_names(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = served
    resp = client.get(f"/runs/{runs['gpu']}/kernels?sort=-calls&q=a")
    page = resp.context["page"]
    assert page.sort_link("calls") == "?sort=%2Bcalls&q=a"
    assert page.sort_link("name") == "?sort=%2Bname&q=a"
    assert page.sort_link("p95_ns") == "?sort=-p95_ns&q=a"
    full = client.get(f"/runs/{runs['gpu']}/kernels").text
    assert MUL_KERNEL.replace("<", "&lt;").replace(">", "&gt;") in full  # the whole C++ name, escaped


def test_hostile_kernel_name_is_escaped(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = served
    for path in (f"/runs/{runs['gpu']}/kernels", f"/runs/{runs['gpu']}/report"):
        text = client.get(path).text
        assert HOSTILE_KERNEL not in text and "<script>alert(" not in text
        assert "&lt;script&gt;alert(&#39;k&#39;)&lt;/script&gt;_kernel" in text


def test_host_only_run_has_an_empty_state(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = served
    assert client.get(f"/api/runs/{runs['host']}/kernels").json() == {
        "rows": [], "device_total_ns": 0, "categories": [],
        "rates": {"device": "", "model": None, "source": None, "time_basis": "device"}}
    resp = client.get(f"/runs/{runs['host']}/kernels")
    assert resp.status_code == 200 and 'id="kernels-empty"' in resp.text and "kernels-table" not in resp.text


def test_report_carries_the_kernel_table(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = served
    store = client.app.state.explorer.store  # type: ignore[attr-defined]
    report = build_report(Run.of(store, runs["gpu"]))
    assert report.kernels is not None
    assert report.kernels.rows == client.get(f"/api/runs/{runs['gpu']}/kernels").json()["rows"]
    assert build_report(Run.of(store, runs["host"])).kernels is None
    text = client.get(f"/runs/{runs['gpu']}/report").text
    assert 'id="report-kernels"' in text and "data-client-sort" in text
    assert 'id="report-kernels"' not in client.get(f"/runs/{runs['host']}/report").text


def test_hardware_busy_leaves_gpu_annotations_out(served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, trace = served
    intervals = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for events in file_executions(trace).values()
                       for e in events)
    busy, end = 0, None
    for a, b in intervals:
        if end is None or a >= end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    lanes = {r["lane"]: r for r in client.get(f"/api/runs/{runs['gpu']}/breakdown").json()["lanes"]}
    assert lanes["hardware"]["busy_ns"] == busy
    assert lanes["hardware"]["excluded_slices"] == 3  # one gpu_user_annotation per step
