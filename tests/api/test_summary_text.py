"""summary-text profiles through the API and the pages: the Summary metrics as the file wrote them, the same
cards as the Parquet export of the same profile, the recommendations and roofline point the metrics allow, the
fields the schema does not know shown, and three files side by side. Expected values come from a plain reading of
the files (tests/ingest/neuron/test_summary_text.py's reader) or of the export's Summary.parquet, never from the code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from tests.ingest.neuron.test_summary_text import FIXTURES, expected_value, plain_profiles

EXPORT = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "device_export"
THREE = ("two_kernels.txt", "matmul_tiled.txt", "rmsnorm_nki.txt")


def summary_text_of(row: dict[str, Any], profile_id: str) -> str:
    """The matmul export's Summary row written the way summary-text writes it (a header, `key value` lines)."""
    lines = ["$ neuron-profile view --output-format summary-text -n matmul.neff -s matmul.ntff",
             "WARN[0000] Failed to parse frameworks info from NEFF", profile_id]
    lines += [f"    {k:<44} {v!r}" for k, v in sorted(row.items()) if v is not None]
    return "\r\n".join(lines) + "\r\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("summary_api")
    row = pq.read_table(EXPORT / "matmul@latest" / "Summary.parquet").to_pylist()[0]
    text = tmp / "matmul_summary.txt"
    text.write_text(summary_text_of(row, "55512"), newline="")
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    runs = {name: ingest_paths(store, [FIXTURES / name], name).id for name in THREE}
    runs["export"] = ingest_paths(store, [EXPORT], "export").id
    runs["matmul_text"] = ingest_paths(store, [text], "matmul text").id
    with TestClient(app) as client:
        yield client, runs


def profiles(client: TestClient, run: str) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = client.get(f"/api/runs/{run}/device/profiles").json()["profiles"]
    return body


def by_total_time(client: TestClient, run: str, total: str) -> dict[str, Any]:
    return next(p for p in profiles(client, run) if p["end_ns"] - p["start_ns"] == round(float(total) * 1e9))


@pytest.mark.parametrize("name", THREE)
def test_summary_metrics_are_the_files_values(served: tuple[TestClient, dict[str, str]], name: str) -> None:
    client, runs = served
    for want in plain_profiles(FIXTURES / name):
        p = by_total_time(client, runs[name], want["total_time"])
        body = client.get(p["links"]["summary"]).json()
        numbers = {k: expected_value(k, v) for k, v in want.items()}
        numbers = {k: v for k, v in numbers.items() if isinstance(v, int | float)}
        assert {k: body["metrics"][k] for k in numbers} == numbers
        view = client.get(p["links"]["self"]).json()
        fields = {f["name"]: f for f in view["summary_fields"]}
        assert fields["instance_type"]["value"] == want["instance_type"]
        assert fields["instance_type"]["published"] is False and fields["total_time"]["published"] is True


def test_unknown_fields_are_shown_on_the_page(served: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = served
    p = profiles(client, runs["rmsnorm_nki.txt"])[0]
    html = client.get(p["links"]["page"]).text
    row = re.search(r'<tr data-field="profiler_version" class="unknown-field">(.*?)</tr>', html, re.S)
    assert row and "2.21.3" in row.group(1) and "not in the schema" in row.group(1)
    assert 'id="summary-only"' in html and 'id="device-timeline"' not in html


def cards(html: str) -> str:
    found = re.search(r'<div class="cards device-cards">.*?\n</div>', html, re.S)
    assert found
    return found.group(0)


def test_parquet_and_summary_text_of_one_profile_show_the_same_cards(
        served: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = served
    parquet = next(p for p in profiles(client, runs["export"]) if p["profile_id"] == "matmul")
    text = profiles(client, runs["matmul_text"])[0]
    assert text["name"] == "matmul" and text["tables"] == ["Summary"]
    html_parquet, html_text = (client.get(p["links"]["page"]).text for p in (parquet, text))
    assert cards(html_parquet) == cards(html_text)
    assert 'data-metric="mfu_estimated_percent"><div class="k">MFU</div><div class="v">54.9' in cards(html_text)
    row = pq.read_table(EXPORT / "matmul@latest" / "Summary.parquet").to_pylist()[0]
    metrics = client.get(text["links"]["summary"]).json()["metrics"]
    assert {k: metrics[k] for k in row} == row


def test_the_roofline_point_from_the_summary_alone(served: tuple[TestClient, dict[str, str]]) -> None:
    """Roofs from the Summary by the published definitions; with the export's Metadata they are the same."""
    client, runs = served
    text = profiles(client, runs["matmul_text"])[0]
    roof = client.get(text["links"]["roofline"]).json()
    assert roof["available"] and roof["roofs_from"] == "summary"
    row = pq.read_table(EXPORT / "matmul@latest" / "Summary.parquet").to_pylist()[0]
    meta = pq.read_table(EXPORT / "matmul@latest" / "Metadata.parquet").to_pylist()[0]
    max_ops = 2 * meta["tensor_engine_num_rows"] * meta["tensor_engine_num_cols"] * Fraction(
        meta["tensor_engine_clock_freq"]) * 10**9
    assert roof["max_ops"] == pytest.approx(float(max_ops), rel=1e-9)
    assert roof["hbm_ddr_bandwidth"] == pytest.approx(meta["hbm_ddr_bandwidth"], rel=1e-6)
    point = roof["points"][0]
    flops = row["hardware_flops"] - row["transpose_flops"]
    assert point["flops"] == flops and point["hbm_bytes"] == row["hbm_read_bytes"] + row["hbm_write_bytes"]
    assert point["intensity"] == pytest.approx(flops / (row["hbm_read_bytes"] + row["hbm_write_bytes"]))
    assert point["bound"] == "compute"  # 512 FLOP/byte over a ridge of 229.4
    parquet = client.get(f"/api/runs/{runs['export']}/device/matmul/roofline").json()
    assert parquet["roofs_from"] == "metadata"
    assert point["achieved_flops_per_s"] == pytest.approx(parquet["points"][0]["achieved_flops_per_s"], rel=1e-9)
    no_roof = client.get(profiles(client, runs["rmsnorm_nki.txt"])[0]["links"]["roofline"]).json()
    assert no_roof["available"] is False  # no FLOPs, no MFU: nothing to place


@pytest.mark.parametrize("name", THREE)
def test_recommendations_from_the_summary(served: tuple[TestClient, dict[str, str]], name: str) -> None:
    client, runs = served
    for want in plain_profiles(FIXTURES / name):
        p = by_total_time(client, runs[name], want["total_time"])
        found = {r["key"]: r for r in client.get(p["links"]["summary"]).json()["recommendations"]}
        average = want.get("dma_transfer_average_bytes")
        fires = average is not None and float(average) < 32 * 1024
        assert ("dma_average_transfer" in found) == fires
        if fires:
            assert found["dma_average_transfer"]["value"] == float(average)


def test_three_files_side_by_side(served: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = served
    wants = [plain_profiles(FIXTURES / name)[0] for name in THREE]
    chosen = [by_total_time(client, runs[name], w["total_time"]) for name, w in zip(THREE, wants, strict=True)]
    query = "&".join(f"p={runs[name]}:{p['profile_id']}" for name, p in zip(THREE, chosen, strict=True))
    body = client.get(f"/api/device/side-by-side?{query}").json()
    assert [p["profile_id"] for p in body["profiles"]] == [p["profile_id"] for p in chosen]
    assert body["summary_only"] == [True, True, True]
    rows = {m["name"]: m for m in body["metrics"]}
    for key in {k for w in wants for k in w}:
        values = [expected_value(key, w[key]) if key in w else None for w in wants]
        assert rows[key]["values"] == values, key
        numbers = [v if isinstance(v, int | float) else None for v in values]
        assert rows[key]["deltas"] == [None if v is None or numbers[0] is None else v - numbers[0]
                                       for v in numbers], key
    engines = {e["name"]: e for e in body["engines"]}
    vector = [float(w["vector_engine_active_time_percent"]) for w in wants]
    assert engines["vector_engine_active_time_percent"]["values"] == vector
    page = client.get(f"/device/side-by-side?{query}")
    assert page.status_code == 200 and page.text.count('<tr data-metric="hbm_read_bytes">') == 1
    assert client.get(f"/api/device/side-by-side?p={runs['matmul_text']}:x").status_code in (400, 404)
    one = f"p={runs['export']}:matmul"
    assert client.get(f"/api/device/side-by-side?{one}").status_code == 400
    by_runs = client.get(f"/api/device/side-by-side?runs={','.join(runs[n] for n in THREE)}").json()
    listed = [(runs[n], p["profile_id"]) for n in THREE for p in profiles(client, runs[n])]
    assert [(r["run_id"], r["profile_id"]) for r in by_runs["profiles"]] == listed and len(listed) == 4


def test_hostile_summary_text_is_escaped_and_bounded(tmp_path: Path) -> None:
    """Markup in a value or a NEFF name is text on the page; a line of junk among metrics is a counted warning."""
    path = tmp_path / "hostile.txt"
    path.write_text("$ neuron-profile view -n <script>alert(1)</script>.neff -s x.ntff\n"
                    "total_time 1e-05\nhbm_read_bytes 10\nhardware_flops 0\nnote <img/src=x/onerror=alert(1)>\n"
                    "this line is junk with spaces\n")
    app = create_app(Settings(data_dir=tmp_path / "data"))
    run = ingest_paths(app.state.explorer.store, [path], "hostile").id
    with TestClient(app) as client:
        p = profiles(client, run)[0]
        html = client.get(p["links"]["page"]).text
        assert "<script>alert(1)" not in html and "<img/src=x" not in html
        assert "&lt;img/src=x/onerror=alert(1)&gt;" in html
        warnings = {w["code"]: w for w in client.get(f"/api/runs/{run}").json()["summary"]["warnings"]}
        assert warnings["summary_text_lines"]["count"] == 1


def test_the_two_profile_compare_takes_summary_text_profiles(served: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = served
    a, b = (profiles(client, runs[n])[0] for n in ("matmul_tiled.txt", "rmsnorm_nki.txt"))
    query = f"a={runs['matmul_tiled.txt']}:{a['profile_id']}&b={runs['rmsnorm_nki.txt']}:{b['profile_id']}"
    body = client.get(f"/api/device/compare?{query}").json()
    want_a, want_b = (plain_profiles(FIXTURES / n)[0] for n in ("matmul_tiled.txt", "rmsnorm_nki.txt"))
    row = {m["name"]: m for m in body["metrics"]}["hbm_write_bytes"]
    assert (row["a"], row["b"], row["delta"]) == (int(want_a["hbm_write_bytes"]), int(want_b["hbm_write_bytes"]),
                                                  int(want_b["hbm_write_bytes"]) - int(want_a["hbm_write_bytes"]))
    assert body["opcodes"] == [] and client.get(f"/device/compare?{query}").status_code == 200


def test_a_published_fraction_is_shown_as_its_percent(tmp_path: Path) -> None:
    """A real neuron-explorer Summary holds total_time 0.213808050051 s, total_active_time 0.20825356317 s and
    total_active_time_percent 0.9740211517776104 (= their ratio): the card says 97.4 %, not 1.0 %."""
    text = tmp_path / "published.txt"
    text.write_text("$ neuron-explorer view --output-format summary-text -n unet.neff -s unet.ntff\n1234\n"
                    "    total_time                  0.213808050051\n"
                    "    total_active_time           0.20825356317\n"
                    "    total_active_time_percent   0.9740211517776104\n"
                    "    tensor_engine_active_time_percent   0.2112\n"
                    "    dma_active_time_percent     0.5\n")
    app = create_app(Settings(data_dir=tmp_path / "data"))
    run = ingest_paths(app.state.explorer.store, [text], "published").id
    with TestClient(app) as client:
        (p,) = profiles(client, run)
        metrics = client.get(p["links"]["summary"]).json()["metrics"]
        assert metrics["total_active_time_percent"] == 0.9740211517776104  # kept as the file has it
        html = client.get(p["links"]["page"]).text
    assert '<div class="d">97.4 % active</div>' in html
    assert 'data-metric="dma_active_time_percent"><div class="k">DMA active</div><div class="v">50.0 %</div>' in html
    tensor = html.split('<tr data-engine="tensor">', 1)[1].split("</tr>", 1)[0]
    assert "<span>21.1 %</span>" in tensor and 'style="width:21.1' in tensor
