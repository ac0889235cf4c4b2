"""The offline report of a run with Neuron device profiles: one section per profile with its Summary
cards and its roofline figure embedded, numbers checked against the export's own Summary and Metadata."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from explorer.report import write_report
from explorer.service import ingest_paths
from explorer.store.runs import RunStore

EXPORT = Path(__file__).resolve().parent / "fixtures" / "neuron" / "device_export"


def first(profile: str, table: str) -> dict[str, Any]:
    row: dict[str, Any] = pq.read_table(EXPORT / f"{profile}@latest" / f"{table}.parquet").to_pylist()[0]
    return row


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("device_report")
    store = RunStore(tmp / "data")
    run = ingest_paths(store, [EXPORT]).id
    write_report(store, run, tmp / "report.html")
    return (tmp / "report.html").read_text()


def figure(html: str, target: str) -> dict[str, Any]:
    found = re.search(rf'<script type="application/json" class="figure" data-target="{target}">(.*?)</script>',
                      html, re.S)
    assert found, target
    fig: dict[str, Any] = json.loads(found.group(1))
    return fig


@pytest.mark.parametrize(("index", "profile"), [(1, "rmsnorm_naive"), (2, "matmul")])  # in start order
def test_report_has_each_profiles_summary_and_roofline(report: str, index: int, profile: str) -> None:
    section = report.split(f'id="report-device-{index}"', 1)[1].split("</section>", 1)[0]
    summary, meta = first(profile, "Summary"), first(profile, "Metadata")
    assert f"Neuron device profile {profile}" in section
    assert f"{summary['hfu_estimated_percent']:.1f} %" in section
    assert f"{summary['mbu_estimated_percent']:.1f} %" in section
    fig = figure(report, f"fig-roofline-{index}")
    traces = {t["name"]: t for t in fig["data"]}
    max_ops = 2 * meta["tensor_engine_num_rows"] * meta["tensor_engine_num_cols"] * Fraction(
        meta["tensor_engine_clock_freq"]) * 10**9
    assert max(traces["roof"]["y"]) == pytest.approx(float(max_ops), rel=1e-12)
    flops = summary["hardware_flops"] - summary["transpose_flops"]
    seconds = Fraction(meta["last_hw_timestamp"] - meta["first_hw_timestamp"], 10**9)
    assert traces["profile"]["y"] == [pytest.approx(float(flops / seconds), rel=1e-12)]
    assert traces["profile"]["x"] == [pytest.approx(flops / (summary["hbm_read_bytes"] + summary["hbm_write_bytes"]))]
