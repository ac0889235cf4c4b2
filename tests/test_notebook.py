"""The notebook API used as a notebook would: `open_run` on a real torch.profiler trace (and a real GPU trace),
each table checked against its HTTP twin served from the same data folder, and against the trace itself
(key_averages() counts, kernel times summed from the raw JSON with decimal arithmetic)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer import Run, open_run
from explorer.config import Settings
from explorer.errors import BadRequest, BadTrace, RunNotFound

GPU_TRACE = "HolisticTraceAnalysis/tests/data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"
HOSTILE = "<script>alert(1)</script>"


def torch_trace(path: Path, steps: int) -> tuple[Path, dict[str, int]]:
    """A CPU profile with shapes and a hostile annotation name; returns it and key_averages()' call counts."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            with record_function(HOSTILE):
                torch.relu(x @ x + 1).sum()
    prof.export_chrome_trace(str(path))
    return path, {e.key: e.count for e in prof.key_averages()}


@dataclass
class Notebook:
    data_dir: Path
    client: TestClient
    run: Run
    other: Run
    trace: Path
    counts: dict[str, int]


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    tmp = tmp_path_factory.mktemp("notebook")
    trace, counts = torch_trace(tmp / "three.json", 3)
    other, _ = torch_trace(tmp / "five.json", 5)
    run, second = open_run(trace, data_dir=tmp / "data"), open_run(other, data_dir=tmp / "data", name="five")
    with TestClient(create_app(Settings(data_dir=tmp / "data"))) as client:
        yield Notebook(tmp / "data", client, run, second, trace, counts)


def api(nb: Notebook, path: str, **params: Any) -> Any:
    r = nb.client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("query", [{}, {"by_shape": True}, {"view": "all", "sort": "-cpu_total_ns"}])
def test_ops_are_the_api_rows(nb: Notebook, query: dict[str, Any]) -> None:
    rows = api(nb, f"/api/runs/{nb.run.id}/ops", **query)["rows"]
    table = nb.run.ops(**query)
    assert table.to_pylist() == rows and len(rows) > 3
    assert table.schema.field("self_cpu_ns").type == "int64"


def test_ops_calls_are_key_averages(nb: Notebook) -> None:
    calls = {r["name"]: r["calls"] for r in nb.run.ops(view="all").to_pylist()}
    aten = {k: v for k, v in nb.counts.items() if k.startswith("aten::")}
    assert aten and {k: calls.get(k) for k in aten} == aten
    assert calls[HOSTILE] == 3


def test_reopening_a_file_reuses_its_run(nb: Notebook) -> None:
    again = open_run(nb.trace, data_dir=nb.data_dir)
    assert again.id == nb.run.id
    assert len(api(nb, "/api/runs")["runs"]) == 2
    assert open_run(nb.run.id, data_dir=nb.data_dir).id == nb.run.id
    assert open_run("five", data_dir=nb.data_dir).id == nb.other.id  # by name
    with pytest.raises(RunNotFound):
        open_run("no-such-run", data_dir=nb.data_dir)


def test_a_bad_file_is_a_clear_error_and_leaves_no_run(nb: Notebook, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(BadTrace, match="broken.json"):
        open_run(bad, data_dir=nb.data_dir)
    assert len(api(nb, "/api/runs")["runs"]) == 2


def test_tables_convert_to_pandas(nb: Notebook) -> None:
    pytest.importorskip("pandas")
    df = nb.run.ops().to_pandas()
    assert list(df.columns) == nb.run.ops().column_names
    assert str(df["self_cpu_ns"].dtype) == "int64"
    assert df.set_index("name").loc[HOSTILE, "calls"] == 3


def test_slices_window_is_the_timeline_window(nb: Notebook) -> None:
    """A window at 1 ns per pixel: every slice at least 1 ns long is drawn on its own (with its id), the
    zero-length ones are merged; the notebook lists each of them once."""
    matmul = nb.run.sql("select ts_ns from slices where name = 'aten::matmul' order by ts_ns limit 1")
    start = matmul.column("ts_ns")[0].as_py() - nb.run.origin_ns - 2_000
    end = start + 20_000
    for lane in (None, "framework"):
        query: dict[str, Any] = {"start_ns": start, "end_ns": end, "width_px": end - start}
        window = api(nb, f"/api/runs/{nb.run.id}/timeline", **query, **({"lanes": lane} if lane else {}))
        drawn = {(i, t, d) for tr in window["tracks"] if tr["kind"] == "slice"
                 for i, t, d in zip(tr["slices"]["id"], tr["slices"]["ts"], tr["slices"]["dur"], strict=True)}
        merged = sum(sum(tr["merged"]["count"]) for tr in window["tracks"] if tr["kind"] == "slice")
        rows = nb.run.slices(start, end, lane=lane).to_pylist()
        assert {(r["slice_id"], r["ts_ns"], r["dur_ns"]) for r in rows if r["dur_ns"] > 0} == drawn and drawn
        assert sum(r["dur_ns"] == 0 for r in rows) == merged
        assert all(r["ts_ns"] <= end and r["ts_ns"] + r["dur_ns"] >= start for r in rows)
        assert lane is None or {r["lane"] for r in rows} == {lane}


def test_slices_reject_bad_windows(nb: Notebook) -> None:
    with pytest.raises(BadRequest, match="greater than"):
        nb.run.slices(100, 100)
    with pytest.raises(BadRequest, match="no lane"):
        nb.run.slices(lane="gpu")


def test_sql_is_the_api_result(nb: Notebook) -> None:
    query = "select name, count(*) as n, sum(dur_ns) as total from slices group by name order by total desc, name"
    r = nb.client.post(f"/api/runs/{nb.run.id}/sql", json={"sql": query})
    assert r.status_code == 200, r.text
    body = r.json()
    table = nb.run.sql(query)
    assert table.column_names == body["columns"]
    assert [list(row.values()) for row in table.to_pylist()] == body["rows"]


def test_compare_is_the_api_comparison(nb: Notebook) -> None:
    body = api(nb, "/api/compare", runs=f"{nb.run.id},{nb.other.id}")
    runs = [r["id"] for r in body["runs"]]
    for kernels, rows in ((False, body["rows"]), (True, body["kernels"]["rows"])):
        table = nb.run.compare(nb.other, kernels=kernels).to_pylist()
        assert len(table) == len(rows) * len(runs)
        for row, (base, other) in zip(rows, zip(table[::2], table[1::2], strict=True), strict=True):
            assert (base["name"], base["run"], base["baseline"]) == (row["name"], runs[0], True)
            assert {k: base[k] for k in row["per_run"][0] or {}} == (row["per_run"][0] or {})
            vs = row["vs_baseline"][0]
            assert (other["run"], other["run_status"], other["pct_change"]) == (vs["run"], vs["status"],
                                                                                   vs["pct_change"])
            assert {k: other[f"delta_{k}"] for k in vs if k not in ("run", "status", "pct_change")} == {
                k: v for k, v in vs.items() if k not in ("run", "status", "pct_change")}
    matmul = next(r for r in nb.run.compare(nb.other).to_pylist() if r["name"] == "aten::matmul" and not r["baseline"])
    assert matmul["delta_calls"] == 2  # five steps against three


def test_repr_html_summarises_and_escapes(nb: Notebook) -> None:
    html = nb.run._repr_html_()
    assert nb.run.name in html and nb.run.id in html and "slices" in html
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'id="ops-table"' in html and "aten::" in html


def test_import_explorer_stays_light() -> None:
    code = ("import sys, explorer; assert 'explorer.notebook' not in sys.modules, 'eager'; "
            "from explorer import open_run; assert 'explorer.notebook' in sys.modules; print(open_run.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "open_run", done.stderr


# ---- a real GPU trace ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu(shared_traces: Path, nb: Notebook) -> tuple[Run, Path]:
    path = shared_traces / GPU_TRACE
    return open_run(path, data_dir=nb.data_dir), path


@pytest.mark.shared
def test_gpu_kernels_are_the_api_rows_and_the_trace(gpu: tuple[Run, Path], nb: Notebook) -> None:
    run, path = gpu
    table = run.kernels().to_pylist()
    assert table == api(nb, f"/api/runs/{run.id}/kernels")["rows"]
    raw = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    kernels = [e for e in raw if e.get("cat") == "kernel" and e.get("ph") == "X"]
    calls = Counter(e["name"] for e in kernels)
    total: Counter[str] = Counter()
    for e in kernels:
        total[e["name"]] += int(Decimal(e["dur"]) * 1000)
    by_name = {r["name"]: (r["calls"], r["total_ns"]) for r in table}
    assert kernels and {n: by_name[n] for n in calls} == {n: (calls[n], total[n]) for n in calls}


@pytest.mark.shared
def test_gpu_breakdown_and_gaps_are_the_api_twins(gpu: tuple[Run, Path], nb: Notebook) -> None:
    run, _ = gpu
    body = api(nb, f"/api/runs/{run.id}/breakdown")
    assert run.breakdown().to_pylist() == body["lanes"]
    assert run.breakdown("device").to_pylist() == body["devices"] and body["devices"]
    gaps = run.gaps().to_pylist()
    assert gaps and len(gaps) == len(body["gaps"]["largest"])
    for got, want in zip(gaps, body["gaps"]["largest"], strict=True):
        flat = {k: v for k, v in want.items() if not isinstance(v, dict)}  # before, after, timeline: flattened
        flat |= {f"{key}.{k}": v for key, sub in want.items() if isinstance(sub, dict) for k, v in sub.items()}
        assert got == flat
    with pytest.raises(BadRequest):
        run.breakdown("thread")
