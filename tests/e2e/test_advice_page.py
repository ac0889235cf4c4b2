"""End-to-end: the advisor's findings on the overview's first screen and on the findings page, in a browser at
1600x1000 on real GPU traces of ../shared/traces (screenshots for review); a finding's evidence link opens the
timeline window it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.views.advice import compute_run_advice

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REAL = {  # name -> a GPU capture under ../shared/traces, and the rule the advisor must put first on it
    "resnet50-workers0": ("kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
                          "dataloader-stalls"),
    "nccl-a100": ("HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz", "host-bound"),
    "resnet50-workers4": ("kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
                          "launch-bound"),
}


@pytest.fixture(scope="module")
def real_runs(server: Any, shared_traces: Path) -> dict[str, str]:
    return {name: ingest_paths(server.state.store, [shared_traces / rel], name).id for name, (rel, _) in REAL.items()}


@pytest.mark.parametrize("name", sorted(REAL))
def test_overview_shows_the_top_findings(page: Any, server: Any, real_runs: dict[str, str], shot: Any,
                                         name: str) -> None:
    run_id = real_runs[name]
    advice = compute_run_advice(Run.of(server.state.store, run_id))
    assert advice["findings"][0]["rule"] == REAL[name][1]
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run_id}")
    page.wait_for_selector("body[data-init='1']")
    box = page.locator("#overview-advice")
    assert box.locator(".finding").count() == min(3, len(advice["findings"]))
    assert box.locator(".finding-title").first.inner_text() == advice["findings"][0]["title"]
    assert box.bounding_box()["y"] < 1000  # on the first screen
    shot(page, f"advice-overview-{name}")


def test_findings_page_and_evidence_link(page: Any, server: Any, real_runs: dict[str, str], shot: Any) -> None:
    run_id = real_runs["resnet50-workers0"]
    advice = compute_run_advice(Run.of(server.state.store, run_id))
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run_id}/advice")
    page.wait_for_selector("body[data-init='1']")
    assert page.get_attribute("#tab-advice", "class") == "on"
    assert page.locator("#advice .finding").count() == len(advice["findings"])
    assert page.locator("#advice .finding-formula").first.inner_text().startswith("Saving = ")
    shot(page, "advice-page-resnet50-workers0", full_page=True)
    link = page.locator("#advice .finding-evidence a[data-kind='timeline']").first
    href = link.get_attribute("href")
    link.click()
    page.wait_for_url("**/timeline?**")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert href is not None and href.split("?", 1)[1] in page.url


def test_compare_shows_the_finding_that_the_fix_removed(page: Any, server: Any, traces: Any, shot: Any,
                                                        tmp_path: Path) -> None:
    """The e2e RMSNorm pair (real CPU captures): the naive run's fusion finding is gone in the fused run."""
    # the same events in other bytes: the session's server must not hold the naive trace itself, which
    # test_ui.py uploads and expects to be new (an upload of identical bytes is answered "already uploaded")
    copy = tmp_path / "advice_pair_before.json"
    copy.write_bytes(traces.naive.read_bytes() + b"\n")
    naive = ingest_paths(server.state.store, [copy], "advice pair: before").id
    fused = server.runs["fused"]
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/compare?runs={naive},{fused}&baseline={naive}")
    page.wait_for_selector("body[data-init='1']")
    gone = page.locator("#compare-advice .finding-gone")
    assert gone.count() >= 1 and "Fuse the hand-written RMSNorm" in gone.first.inner_text()
    shot(page, "advice-compare-rmsnorm")
