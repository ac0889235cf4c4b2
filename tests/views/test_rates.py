"""Achieved rates on the ops and kernels pages and their JSON twins: a constructed H100 trace whose GEMM, convolution,
attention and elementwise ops each launch one kernel, every number recomputed from the file with plain json; an
unknown device gets no peak and says so; a host-only run divides by CPU time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.views.kernels import build_kernels_page
from explorer.views.ops import build_ops_page
from tests.analysis.advice.builder import Op, build

H100 = "NVIDIA H100 80GB HBM3"
BF16 = "c10::BFloat16"
CONV_CONCRETE = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]  # conv2d(x, w, None, stride, padding, dilation, groups)


def ops() -> list[Op]:
    return [
        Op("aten::mm", 10, [[256, 512], [512, 1024]], 40, types=[BF16, BF16]),
        Op("aten::conv2d", 10, [[8, 16, 32, 32], [32, 16, 3, 3], [], [], [], [], []], 30,
           types=["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"], concrete=CONV_CONCRETE),
        Op("aten::_scaled_dot_product_flash_attention", 10, [[4, 8, 512, 64], [4, 8, 512, 64], [4, 8, 512, 64]], 25,
           types=[BF16] * 3),
        Op("aten::mul", 10, [[1024, 1024], [1024, 1024]], 3, types=["float", "float"]),
        Op("aten::mul", 10, [[1024, 1024], [1024, 1024]], 5, types=["float", "float"]),
        Op("aten::relu", 10, [[1024, 1024]], 4, types=["weird"]),  # a dtype the table does not know: no rate
    ]


def truth(path: Path, name: str) -> tuple[int | None, int, int]:
    """(FLOPs, bytes, device ns) of every call of `name`, from the file: the formulas written out here."""
    doc = json.loads(path.read_text())["traceEvents"]
    calls = [e for e in doc if e.get("cat") == "cpu_op" and e["name"] == name]
    kern = {e["args"]["correlation"]: e["dur"] for e in doc if e.get("cat") == "kernel"}
    flops: int | None = 0
    nbytes = 0
    for e in calls:
        d = e["args"]["Input Dims"]
        if name == "aten::mm":
            (m, k), (_, n) = d[0], d[1]
            flops, nbytes = (flops or 0) + 2 * m * n * k, nbytes + (m * k + k * n + m * n) * 2
        elif name == "aten::conv2d":
            (n_, cin, h, w), (cout, _, kh, kw) = d[0], d[1]
            ho, wo = (h + 2 - 2 - 1) // 1 + 1, (w + 2 - 2 - 1) // 1 + 1  # padding 1, dilation 1, stride 1
            flops = (flops or 0) + 2 * n_ * cout * ho * wo * cin * kh * kw
            nbytes += (n_ * cin * h * w + cout * cin * kh * kw + n_ * cout * ho * wo) * 4
        elif name.startswith("aten::_scaled"):
            b, hh, lq, dd = d[0]
            flops = (flops or 0) + 4 * b * hh * lq * d[1][2] * dd
            nbytes += 4 * b * hh * lq * dd * 2
        else:
            flops, nbytes = None, nbytes + 3 * 1024 * 1024 * 4
    return flops, nbytes, sum(kern[e["args"]["External id"]] for e in calls) * 1000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("rates")
    paths = {"h100": build(ops(), tmp / "h100.json", H100), "v100": build(ops(), tmp / "v100.json", "Tesla V100"),
             "host": build([Op(o.name, o.dur, o.shapes, None, types=o.types, concrete=o.concrete) for o in ops()],
                           tmp / "host.json", H100)}  # a GPU box's capture without device activity
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    runs = {k: ingest_paths(store, [p], k).id for k, p in paths.items()}
    with TestClient(app) as client:
        yield client, store, runs, paths


PEAKS = {"aten::mm": 989_500 * 10**9, "aten::conv2d": 67 * 10**12,
         "aten::_scaled_dot_product_flash_attention": 989_500 * 10**9, "aten::mul": 3_350 * 10**9}


def test_ops_page_and_twin_show_the_files_rates_against_the_h100(served: Any) -> None:
    client, store, runs, paths = served
    page = build_ops_page(Run.of(store, runs["h100"]))
    twin = client.get(f"/api/runs/{runs['h100']}/ops").json()
    assert twin["rates"] == page.rates and twin["rates"]["model"] == "H100 SXM" and twin["rates"]["time_basis"] == "device"
    rows = {r["name"]: r for r in twin["rows"]}
    assert {r["name"]: r.get("work") for r in page.rows} == {n: r.get("work") for n, r in rows.items()}
    for name, peak in PEAKS.items():
        flops, nbytes, dev_ns = truth(paths["h100"], name)
        w = rows[name]["work"]
        assert (w["flops"], w["bytes"], w["time_ns"]) == (flops, nbytes, dev_ns), name
        achieved = nbytes * 10**9 // dev_ns if flops is None else flops * 10**9 // dev_ns
        assert (w["bytes_per_s"] if flops is None else w["flop_per_s"]) == achieved
        assert w["peak_per_s"] == peak and w["pct_of_peak"] == pytest.approx(100 * achieved / peak)
    assert rows["aten::relu"]["work"] is None
    html = client.get(f"/runs/{runs['h100']}/ops").text
    assert 'id="ops-rates-note"' in html and "H100 SXM" in html and "of peak" in html


def test_kernels_page_and_twin_carry_the_launching_ops_work(served: Any) -> None:
    client, store, runs, paths = served
    page = build_kernels_page(Run.of(store, runs["h100"]))
    twin = client.get(f"/api/runs/{runs['h100']}/kernels").json()
    assert twin["rates"] == page.rates
    rows = {r["name"]: r for r in twin["rows"]}
    assert {r["name"]: r.get("work") for r in page.rows} == {n: r.get("work") for n, r in rows.items()}
    for name in PEAKS:
        flops, nbytes, dev_ns = truth(paths["h100"], name)
        w = rows[f"{name}_kernel"]["work"]
        assert (w["flops"], w["bytes"], w["time_ns"]) == (flops, nbytes, dev_ns), name
        assert w["pct_of_peak"] is not None
    assert rows["aten::relu_kernel"]["work"] is None
    html = client.get(f"/runs/{runs['h100']}/kernels").text
    assert 'id="kernels-rates-note"' in html and "of peak" in html


def test_an_unknown_device_gets_rates_and_no_peak(served: Any) -> None:
    client, _, runs, paths = served
    twin = client.get(f"/api/runs/{runs['v100']}/ops").json()
    assert twin["rates"] == {"device": "Tesla V100", "model": None, "source": None, "time_basis": "device"}
    mm = next(r for r in twin["rows"] if r["name"] == "aten::mm")["work"]
    flops, _, dev_ns = truth(paths["v100"], "aten::mm")
    assert mm["flop_per_s"] == (flops or 0) * 10**9 // dev_ns and mm["peak_per_s"] is None and mm["pct_of_peak"] is None
    html = client.get(f"/runs/{runs['v100']}/ops").text
    assert "unknown device “Tesla V100”" in html and "work-pct" not in html


def test_a_host_only_run_divides_by_cpu_time(served: Any) -> None:
    client, _, runs, paths = served
    twin = client.get(f"/api/runs/{runs['host']}/ops?by_shape=1").json()
    assert twin["rates"]["time_basis"] == "cpu" and twin["rates"]["model"] is None
    assert twin["rates"]["device"] == H100  # known, but CPU time is no share of its peak
    calls = [e for e in json.loads(paths["host"].read_text())["traceEvents"] if e.get("name") == "aten::mul"]
    mul = next(r for r in twin["rows"] if r["name"] == "aten::mul")
    assert mul["work"]["time_ns"] == sum(e["dur"] for e in calls) * 1000 == mul["cpu_total_ns"]
    assert mul["work"]["calls"] == 2 and mul["work"]["pct_of_peak"] is None and mul["work"]["peak_per_s"] is None
    assert "no device peak applies" in client.get(f"/runs/{runs['host']}/ops").text
