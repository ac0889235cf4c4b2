"""End-to-end: the steps page in a browser on a GPU-like Kineto trace with three ProfilerStep#N: the table
and the stacked chart draw, and the slowest-step link opens the timeline on exactly that step (with its
margin); the overview's gap link opens the gap's window."""

from __future__ import annotations

from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from tests.helpers.kernel_trace import STEPS, write_kernel_trace

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def step_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = write_kernel_trace(tmp_path_factory.mktemp("step-traces") / "steps.json")
    return ingest_paths(server.state.store, [path], "steps").id


def view(page: Any) -> tuple[float, float]:
    v = page.evaluate("() => TE.timelineApi.view()")
    return float(v["start"]), float(v["end"])


def test_steps_page_table_chart_and_slowest_link(page: Any, server: Any, step_run: str, shot: Any) -> None:
    steps = Run.of(server.state.store, step_run).steps()
    page.goto(f"{server.url}/runs/{step_run}/steps")
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#fig-steps .main-svg")
    assert page.locator("#steps-table tbody tr").count() == STEPS
    assert page.get_attribute("#tab-steps", "class") == "on"
    assert page.locator("#fig-steps .bars .point").count() > 0
    slow = steps["steps"][steps["slowest"]]
    assert page.inner_text("#slowest-step") == slow["name"]
    assert page.locator("#steps-table tr.slowest").count() == 1
    shot(page, "steps-page", full_page=True)
    page.click("#slowest-step")
    page.wait_for_url("**/timeline?**")
    page.wait_for_selector("#timeline[data-ready='1']")
    w = slow["timeline"]
    assert view(page) == pytest.approx((w["start"], w["end"]), abs=1)
    assert f"hl_start={w['hl_start']}" in page.url and f"hl_end={w['hl_end']}" in page.url
    shot(page, "steps-slowest-timeline")


def test_overview_gap_link_opens_the_gap(page: Any, server: Any, step_run: str) -> None:
    gap = Run.of(server.state.store, step_run).breakdown()["gaps"]["largest"][0]
    page.goto(f"{server.url}/runs/{step_run}")
    page.wait_for_selector("body[data-init='1']")
    assert gap["cause_detail"] in page.inner_text("#gaps tbody tr:first-child")
    page.click("#gaps tbody tr:first-child a.gap-link")
    page.wait_for_selector("#timeline[data-ready='1']")
    w = gap["timeline"]
    assert view(page) == pytest.approx((w["start"], w["end"]), abs=1)
    assert 0 <= w["start"] <= gap["start"] < gap["end"] <= w["end"]
