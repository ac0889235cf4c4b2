"""The offline report: a run with Neuron device profiles gets one section per profile (Summary cards and
roofline, checked against the export's own Summary and Metadata); a multi-rank run its Ranks, Collectives and
device-gap sections (checked against the rank files, decimal arithmetic); and a report's weight is bounded
(tables cut at REPORT_TABLE_ROWS, the snapshot's extras within byte budgets), not the trace's."""

from __future__ import annotations

import html as html_lib
import json
import re
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from explorer.report.html import REPORT_TABLE_ROWS, write_report
from explorer.report.snapshot import SNAPSHOT_PART_BYTES, json_size
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore

EXPORT = Path(__file__).resolve().parents[1] / "fixtures" / "neuron" / "device_export"
BIG_TRACE = "HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz"
# a report's bytes beyond those of a one-op run's report (its inlined styles, scripts and plotly.js), at most,
# as a share of the trace's JSON: measured 4.0 % on BIG_TRACE (28 % before the byte budgets), 2.6 % on
# df_index_resolver (53.7 MB of JSON: 9.7 MB of report before, 2.8 MB after)
REPORT_SHARE = Decimal("0.05")


def first(profile: str, table: str) -> dict[str, Any]:
    row: dict[str, Any] = pq.read_table(EXPORT / f"{profile}@latest" / f"{table}.parquet").to_pylist()[0]
    return row


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("device_report")
    store = RunStore(tmp / "data")
    run = ingest_paths(store, [EXPORT]).id
    write_report(Run.of(store, run), tmp / "report.html")
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
    assert f"{100 * summary['hfu_estimated_percent']:.1f} %" in section  # the file's fraction, shown as %
    assert f"{100 * summary['mbu_estimated_percent']:.1f} %" in section
    fig = figure(report, f"fig-roofline-{index}")
    traces = {t["name"]: t for t in fig["data"]}
    max_ops = 2 * meta["tensor_engine_num_rows"] * meta["tensor_engine_num_cols"] * Fraction(
        meta["tensor_engine_clock_freq"]) * 10**9
    assert max(traces["roof"]["y"]) == pytest.approx(float(max_ops), rel=1e-12)
    flops = summary["hardware_flops"] - summary["transpose_flops"]
    seconds = Fraction(meta["last_hw_timestamp"] - meta["first_hw_timestamp"], 10**9)
    assert traces["profile"]["y"] == [pytest.approx(float(flops / seconds), rel=1e-12)]
    assert traces["profile"]["x"] == [pytest.approx(flops / (summary["hbm_read_bytes"] + summary["hbm_write_bytes"]))]


def section(html: str, sid: str) -> str:
    return html.split(f'id="{sid}"', 1)[1].split("</section>", 1)[0]


def report_of(tmp: Path, sources: list[Path], name: str) -> str:
    store = RunStore(tmp / f"data-{name}")
    run = ingest_paths(store, sources, name).id
    write_report(Run.of(store, run), tmp / f"{name}.html")
    return (tmp / f"{name}.html").read_text()


def test_multi_rank_report_has_ranks_collectives_and_gaps(tmp_path: Path) -> None:
    from tests.analysis.collectives.synthetic import straggler_calls, write_run

    files = write_run(tmp_path / "run", {r: straggler_calls(r) for r in range(4)})
    html = report_of(tmp_path, [tmp_path / "run"], "ranks")
    # from the files: each rank's kernels (pid = its device) with their start and end in ns
    kernels: dict[int, list[tuple[int, int]]] = {}
    for f in files:
        doc = json.loads(f.read_text(), parse_float=Decimal)
        rank = doc["distributedInfo"]["rank"]
        kernels[rank] = sorted((int(Decimal(e["ts"]) * 1000), int(Decimal(e["ts"]) * 1000) + int(e["dur"]) * 1000)
                               for e in doc["traceEvents"] if e.get("cat") == "kernel")
    ranks = section(html, "report-ranks")
    assert sorted(int(r) for r in re.findall(r'class="rank-row[^"]*" data-rank="(\d+)"', ranks)) == sorted(kernels)
    # collectives: one per call index, matched across the 4 ranks; the last arriver starts its kernel last
    colls = section(html, "report-collectives")
    calls = len(next(iter(kernels.values())))
    assert re.search(rf'Collectives <span class="pill">{calls}</span>', colls)
    last = [max(kernels, key=lambda r: kernels[r][k][0]) for k in range(calls)]
    assert [int(x) for x in re.findall(r'data-seq="\d+" data-last="(\d+)"', colls)] == last
    # device gaps: between consecutive kernels of each device
    want = Counter(b[0] - a[1] for ks in kernels.values() for a, b in zip(ks, ks[1:], strict=False) if b[0] > a[1])
    assert sum(want.values()) == len(files) * (calls - 1)
    gaps = section(html, "report-gaps")
    assert re.search(rf'Device gaps <span class="pill">{sum(want.values())}</span>', gaps)
    rows = re.findall(r'<tr class="gap-row".*?</tr>', gaps, re.S)
    got = Counter(int(re.findall(r'data-v="(\d+)"', r)[1]) for r in rows)
    assert got == want


@pytest.mark.slow
def test_report_tables_are_capped_at_their_first_rows(tmp_path: Path) -> None:
    from tests.helpers.support import bench_module

    trace = tmp_path / "wide.json"
    bench_module("synth").write_kineto_trace(trace, 30_000, distinct=1500)
    html = report_of(tmp_path, [trace], "wide")
    doc = json.loads(trace.read_text(), parse_float=Decimal)
    totals: Counter[str] = Counter()
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            totals[e["name"]] += int(Decimal(str(e["dur"])) * 1000)
    kernels = section(html, "report-kernels")
    assert f"{len(totals):,} kernels" in kernels and len(totals) > REPORT_TABLE_ROWS
    rows = re.findall(r'<td class="kname">(.*?)</td>.*?data-v="\d+".*?data-v="(\d+)"', kernels, re.S)
    assert len(rows) == REPORT_TABLE_ROWS  # the first rows by total time, each with the file's own total
    assert all(totals[html_lib.unescape(n)] == int(t) for n, t in rows)
    assert sorted((int(t) for _, t in rows), reverse=True) == sorted(totals.values(), reverse=True)[:REPORT_TABLE_ROWS]
    assert f"the first {REPORT_TABLE_ROWS} of {len(totals):,} kernels" in kernels
    ops = section(html, "report-ops")
    assert len(re.findall(r'<td class="name"', ops)) == REPORT_TABLE_ROWS and "the first 500 of" in ops


def snapshot(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="timeline-snapshot">(.*?)</script>', html, re.S)
    assert found
    snap: dict[str, Any] = json.loads(found.group(1))
    return snap


@pytest.mark.shared
@pytest.mark.slow
def test_report_weight_is_bounded_relative_to_the_trace(shared_traces: Path, tmp_path: Path) -> None:
    import gzip

    from tests.helpers.kernel_trace import host_only_trace

    trace_bytes = len(gzip.decompress((shared_traces / BIG_TRACE).read_bytes()))
    base = len(report_of(tmp_path, [host_only_trace(tmp_path / "one_op.json")], "one_op").encode())
    html = report_of(tmp_path, [shared_traces / BIG_TRACE], "big")
    assert len(html.encode()) - base <= REPORT_SHARE * trace_bytes, (len(html.encode()), base, trace_bytes)
    snap = snapshot(html)  # the extras over budget are left out whole (the offline panel says so), not cut
    for part in ("search", "ops", "chains"):
        assert snap[part] is None or json_size(snap[part]) <= SNAPSHOT_PART_BYTES
    assert snap["window"]["tracks"]  # the timeline is there, at overview zoom
    for sid in ("report-gaps", "report-ranks", "report-collectives", "report-kernels", "report-steps"):
        assert f'id="{sid}"' in html


def test_the_report_timeline_puts_the_device_on_the_host_axis_with_its_alignment(tmp_path: Path) -> None:
    """The snapshot holds the device profiles' tracks and their slices at the host-clock times the live timeline
    draws them at, and each profile's alignment for the legend: the shift recomputed from the export (a copy whose
    host clock runs 4,321 ns early, tests/helpers/neuron_shifted.py)."""
    from explorer.report.html import SNAPSHOT_HEIGHT_PX, SNAPSHOT_WIDTH_PX, build_snapshot
    from explorer.views.timeline import compute_run_window
    from tests.helpers.neuron_shifted import expected_placement, write_shifted_export

    export = write_shifted_export(tmp_path)
    store = RunStore(tmp_path / "data")
    run = Run.of(store, ingest_paths(store, [export]).id)
    snap = build_snapshot(run)
    shifts = {p["profile_id"]: p["alignment"]["shift_ns"] for p in snap["device_alignment"]}
    assert shifts == {name: expected_placement(export, name)["shift"] for name in ("matmul", "rmsnorm_naive")}
    assert shifts == {"matmul": -4021, "rmsnorm_naive": -4321}
    device_tracks = {t["track_id"] for t in snap["tracks"]["tracks"] if t.get("device_profile")}
    drawn = {t["track_id"] for t in snap["window"]["tracks"] if (t.get("slices") or {}).get("id")}
    assert device_tracks and device_tracks & drawn  # the engines' slices are in the report's one window
    start, span = run.default_window()
    live = compute_run_window(run, start, span, SNAPSHOT_WIDTH_PX, SNAPSHOT_HEIGHT_PX)
    on_device = {t["track_id"]: t for t in live["tracks"] if t["track_id"] in device_tracks}
    assert on_device == {t["track_id"]: t for t in snap["window"]["tracks"] if t["track_id"] in device_tracks}
