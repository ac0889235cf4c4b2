"""The Neuron device page in a browser: reached from the run's nav, Summary cards as the export's Summary
row says, the roofline drawn by plotly (roof, profile and framework-op traces) and the compare page of two
device profiles with its deltas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EXPORT = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "device_export"


@pytest.fixture(scope="module")
def neuron_run(server: Any) -> str:
    from explorer.runs.ingest import ingest_paths

    return str(ingest_paths(server.state.store, [EXPORT], "neuron device export").id)


def summary_row(profile: str) -> dict[str, Any]:
    row: dict[str, Any] = pq.read_table(EXPORT / f"{profile}@latest" / "Summary.parquet").to_pylist()[0]
    return row


def test_device_page_from_the_nav_with_its_roofline(page: Any, server: Any, neuron_run: str, shot: Any) -> None:
    page.goto(f"{server.url}/runs/{neuron_run}")
    page.wait_for_selector("body[data-init='1']")
    page.click("#device-profiles a:has-text('matmul')")
    page.wait_for_url(f"**/runs/{neuron_run}/device/matmul")
    page.wait_for_selector("#fig-roofline .main-svg")
    names = page.evaluate("() => document.getElementById('fig-roofline').data.map((t) => t.name)")
    assert names[0] == "roof" and {"profile", "layer"} <= set(names)
    points = page.evaluate("() => document.querySelectorAll('#fig-roofline .scatterlayer .point').length")
    twin = page.evaluate(f"() => fetch('/api/runs/{neuron_run}/device/matmul/roofline').then((r) => r.json())")
    drawable = [p for p in twin["points"] if p["achieved_flops_per_s"]]  # no FLOPs: no place on a log axis
    assert points == len(drawable) >= 2  # the profile and aten::mm (aten::t only transposes)
    row = summary_row("matmul")
    assert page.inner_text("[data-metric='hfu_estimated_percent'] .v") == f"{100 * row['hfu_estimated_percent']:.1f} %"
    assert page.inner_text("[data-metric='mbu_estimated_percent'] .v") == f"{100 * row['mbu_estimated_percent']:.1f} %"
    assert page.locator("#tab-device-2").get_attribute("class") == "on"  # matmul starts second
    shot(page, "device-01-matmul", full_page=True)


def test_memory_bound_profile_warns_about_small_transfers(page: Any, server: Any, neuron_run: str,
                                                          shot: Any) -> None:
    page.goto(f"{server.url}/runs/{neuron_run}/device/rmsnorm_naive")
    page.wait_for_selector("#fig-roofline .main-svg")
    bound = page.evaluate("() => document.getElementById('fig-roofline').data"
                          ".find((t) => t.name === 'profile').hovertext[0]")
    assert "memory-bound" in bound
    assert page.is_visible("#small-dma")
    assert page.locator(".device-advice [data-rule='dma_average_transfer']").count() == 1
    shot(page, "device-02-rmsnorm", full_page=True)


def test_window_summary_from_the_form(page: Any, server: Any, neuron_run: str, shot: Any) -> None:
    page.goto(f"{server.url}/runs/{neuron_run}/device/matmul")
    profile = page.evaluate(f"() => fetch('/api/runs/{neuron_run}/device/profiles').then((r) => r.json())")
    matmul = next(p for p in profile["profiles"] if p["profile_id"] == "matmul")
    page.fill("#window-start", str(matmul["start_ns"] + 2000))
    page.fill("#window-end", str(matmul["start_ns"] + 12000))
    page.click("#window-form button")
    page.wait_for_selector("#window-summary")
    assert page.inner_text("#window-summary [data-metric='total_time'] .v") == "10.000 µs"
    page.wait_for_selector("#fig-roofline .main-svg")
    names = page.evaluate("() => document.getElementById('fig-roofline').data.map((t) => t.name)")
    assert "window" in names
    shot(page, "device-04-window", full_page=True)


def test_compare_two_device_profiles(page: Any, server: Any, neuron_run: str, shot: Any) -> None:
    page.goto(f"{server.url}/device/compare?a={neuron_run}:rmsnorm_naive&b={neuron_run}:matmul")
    page.wait_for_selector("#compare-metrics")
    a, b = summary_row("rmsnorm_naive"), summary_row("matmul")
    cells = page.locator("#compare-metrics tr[data-metric='tensor_engine_instruction_count'] td").all_inner_texts()
    count = "tensor_engine_instruction_count"
    assert cells[1:] == [f"{a[count]:,}", f"{b[count]:,}", f"{b[count] - a[count]:,}"]
    assert page.locator("#compare-opcodes tbody tr").count() > 0
    shot(page, "device-03-compare", full_page=True)
