"""Issue 41 in a browser (1600x1000): three summary-text files side by side from a device page, a Summary-only
device page, a traced dependency chain reached from the device page's form, and a NEFF/NTFF pair's run page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.api.test_device_chain import write_profile
from tests.ingest.neuron.test_files import neff_bytes
from tests.ingest.neuron.test_summary_text import FIXTURES, plain_profiles

pytestmark = [pytest.mark.browser, pytest.mark.slow]
THREE = ("two_kernels.txt", "matmul_tiled.txt", "rmsnorm_nki.txt")


@pytest.fixture(scope="module")
def neuron_runs(server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from explorer.runs.ingest import ingest_paths

    tmp = tmp_path_factory.mktemp("issue41")
    pair = tmp / "vector_add"
    pair.mkdir()
    (pair / "vector_add.neff").write_bytes(neff_bytes(b"2.21.33363.0+82af5a53"))
    (pair / "vector_add.ntff").write_bytes(bytes(range(256)) * 8)
    store = server.state.store
    runs = {name: str(ingest_paths(store, [FIXTURES / name], name.removesuffix(".txt")).id) for name in THREE}
    runs["chain"] = str(ingest_paths(store, [write_profile(tmp)], "dependency chain").id)
    runs["pair"] = str(ingest_paths(store, [pair], "vector_add NEFF + NTFF").id)
    return runs


def test_three_summary_text_files_side_by_side(page: Any, server: Any, neuron_runs: dict[str, str],
                                               shot: Any) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{neuron_runs['two_kernels.txt']}/device/vector_add_fd2k")
    page.wait_for_selector("#summary-only")
    want = plain_profiles(FIXTURES / "two_kernels.txt")[0]
    assert page.inner_text("[data-metric='mbu_estimated_percent'] .v") == f"{100 * float(want['mbu_estimated_percent']):.1f} %"
    assert page.inner_text("#summary-fields tr[data-field='instance_type'] td.num") == want["instance_type"]
    shot(page, "issue41-01-summary-text-device", full_page=True)
    page.goto(f"{server.url}/")  # the runs list: pick the three files' runs, then the device side-by-side button
    for name in THREE:
        page.check(f"input.pick-run[value='{neuron_runs[name]}']")
    page.click("#device-side-btn")
    page.wait_for_selector("#side-metrics")
    cells = page.locator("#side-engines tr[data-metric='vector_engine_active_time_percent'] td").all_inner_texts()
    profiles = page.locator("#side-engines thead th").all_inner_texts()
    assert len(profiles) == 5  # engine + vector_add_fd1k, vector_add_fd2k, matmul_tiled, rmsnorm_nki
    assert len(cells) == 5 and cells[2].startswith("71.5 %")  # vector_add_fd2k, second of its file
    shot(page, "issue41-02-side-by-side", full_page=False)


def test_trace_a_chain_from_the_device_page(page: Any, server: Any, neuron_runs: dict[str, str], shot: Any) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{neuron_runs['chain']}/device/chain")
    page.fill("#chain-node-input", "Instruction:30")
    page.click("#chain-form button")
    page.wait_for_selector("#chain-root")
    assert page.locator("#chain-steps tr[data-step]").count() == 2
    assert "ACTIVATE" in page.inner_text("#chain-root") and "scalar" in page.inner_text("#chain-root")
    shot(page, "issue41-03-traced-chain", full_page=False)
    page.click("#chain-step")
    page.wait_for_selector("#chain-steps")
    assert page.locator("#chain-steps tr[data-step]").count() == 1


def test_neff_ntff_run_page(page: Any, server: Any, neuron_runs: dict[str, str], shot: Any) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{neuron_runs['pair']}")
    page.wait_for_selector("#neuron-files")
    assert "neuron-explorer view -n vector_add.neff" in page.inner_text("#neuron-files")
    shot(page, "issue41-04-neff-ntff", full_page=False)


def test_host_and_device_on_one_axis(page: Any, server: Any, shot: Any) -> None:
    """The export's execution slice selected: its details state how the device tracks sit on the axis; opening
    the device profile shows its engines and DMA queues in the same timeline as the host lanes and counters."""
    from explorer.runs.ingest import ingest_paths

    export = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "device_export"
    run = str(ingest_paths(server.state.store, [export], "neuron export (one axis)").id)
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run}")
    profiles = page.evaluate(f"() => fetch('/api/runs/{run}/device/profiles').then((r) => r.json())")
    matmul = next(p for p in profiles["profiles"] if p["profile_id"] == "matmul")
    page.goto(f"{server.url}/runs/{run}/timeline?sel={matmul['system_slice_id']}")
    page.wait_for_selector("#tl-device-alignment")
    assert "agree to within 0 ns" in page.inner_text("#tl-device-alignment")
    page.click("#tl-open-device")
    page.wait_for_timeout(800)
    shot(page, "issue41-05-one-axis-timeline", full_page=False)
