"""End-to-end: the fleet page in a browser over real ingests of synthetic Kineto traces of growing size,
tagged as one nightly series: the trend chart draws, the table's numbers are each run's own op table,
the newest run is marked as a regression at a glance, the form and its suggestions switch name and kind,
and a hostile op name stays text (the harness fails the test on any dialog)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.store.queries import load_ops
from explorer.views.render import fmt_dur
from tests.e2e.conftest import HOSTILE_NAMES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from synth import write_kineto_trace  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TAG = "fleet-e2e"
SIZES = (600, 612, 606, 618, 1200)  # the last run does twice the work: a regression


@pytest.fixture(scope="module")
def fleet_runs(server: Any, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("fleet-traces")
    ids = []
    for i, events in enumerate(SIZES):
        path = folder / f"nightly-{i + 1}.json"
        write_kineto_trace(path, events)
        # a hostile op name in every run, so the suggestions, the chart and the table carry it
        path.write_text(path.read_text().replace('"aten::mul"', '"' + HOSTILE_NAMES[1].replace('"', '\\"') + '"'))
        rec = ingest_paths(server.state.store, [path], f"nightly-{i + 1}")
        server.state.store.catalog.set_tags(rec.id, [TAG])
        ids.append(rec.id)
    return ids


def test_fleet_page_answers_did_the_last_run_regress(page: Any, server: Any, fleet_runs: list[str], shot: Any) -> None:
    page.goto(f"{server.url}/fleet?name=aten::linear&tag={TAG}")
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#fig-fleet .main-svg")
    assert page.locator("#fig-fleet .scatterlayer .point").count() >= len(SIZES)
    rows = page.locator("#fleet-table tbody tr")
    assert rows.count() == len(SIZES)
    assert [rows.nth(i).get_attribute("data-run") for i in range(len(SIZES))] == fleet_runs
    for i, run_id in enumerate(fleet_runs):
        op = next(r for r in load_ops(server.state.store, run_id, name_filter="aten::linear") if r["name"] == "aten::linear")
        cells = rows.nth(i).locator("td")
        assert cells.nth(5).get_attribute("data-v") == str(op["calls"])
        assert cells.nth(6).get_attribute("data-v") == str(op["device_total_ns"])
        assert cells.nth(6).inner_text() == fmt_dur(op["device_total_ns"])
    assert rows.nth(len(SIZES) - 1).get_attribute("class") == "verdict-regression"
    assert page.text_content("#fleet-latest-verdict") == "regression"
    shot(page, "fleet-page", full_page=True)


def test_fleet_form_and_suggestions_switch_name_and_kind(page: Any, server: Any, fleet_runs: list[str], shot: Any) -> None:
    page.goto(f"{server.url}/fleet?tag={TAG}")
    page.wait_for_selector("body[data-init='1']")
    assert page.locator("#fleet-suggestions a").filter(has_text=HOSTILE_NAMES[1]).count() == 1
    page.locator("#fleet-suggestions a").filter(has_text=HOSTILE_NAMES[1]).click()
    page.wait_for_url("**name=**")
    page.wait_for_selector("#fig-fleet .main-svg")
    shot(page, "fleet-hostile-name")
    assert HOSTILE_NAMES[1] in page.inner_text("#fleet-headline") and page.locator("#fleet-table img").count() == 0
    page.select_option("#fleet-kind", "kernel")
    page.fill("#fleet-name", "")
    page.fill("#fleet-last", "3")
    page.click("#fleet-form button[type=submit]")
    page.wait_for_url("**kind=kernel**")
    page.wait_for_selector("#fig-fleet .main-svg")
    assert page.locator("#fleet-table tbody tr").count() == 3
    first = page.locator("#fleet-suggestions a").first
    name = first.inner_text().split(" · ")[0]
    first.click()
    page.wait_for_url("**?name=*&kind=kernel*")  # the suggestion's link (the form's puts kind first)
    page.wait_for_selector("#fig-fleet .main-svg")
    assert page.locator("#fleet-table tbody tr").count() == 3 and name in page.inner_text("#fleet-headline")
    page.goto(f"{server.url}/fleet?tag={TAG}&name=no-such-op")
    page.wait_for_selector("body[data-init='1']")
    assert "no op named 'no-such-op'" in page.inner_text("#fleet-note")
    shot(page, "fleet-unknown-name")
