"""Issue 34 in a real browser, on the constructed 8-rank run whose rank 5 starts late and arrives last while
rank 1 waits longest (tests/analysis/collectives/synthetic.StepPlan): the Steps page draws one row and one bar per (rank, step)
on a step x rank axis, the Ranks page names rank 5 as straggler and latest arriver with its evidence, and the
overview's gaps table has a Rank column."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from tests.analysis.collectives.synthetic import EXTRA, StepPlan, write_step_run
from tests.e2e.conftest import serving

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PLAN = StepPlan()


@pytest.fixture(scope="module")
def late_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("late-starter-ui")
    app = create_app(Settings(data_dir=tmp / "data"))
    run = ingest_paths(app.state.explorer.store, write_step_run(tmp / "traces", PLAN), "eight ranks").id
    with serving(app) as url:
        yield url, run


def test_steps_page_per_rank(page: Any, late_server: tuple[str, str], shot: Any) -> None:
    url, run = late_server
    page.goto(f"{url}/runs/{run}/steps")
    page.wait_for_selector("#fig-steps .main-svg")
    rows = page.locator("#steps-table tbody tr")
    assert rows.count() == PLAN.world * PLAN.steps
    assert [rows.nth(i).get_attribute("data-rank") for i in range(0, rows.count(), PLAN.steps)] == \
        [str(r) for r in range(PLAN.world)]
    assert page.locator("#steps-table tr.slowest").count() == PLAN.world
    # one bar per (step, rank) on a two-level axis, none stacked onto another rank's
    x = page.evaluate("() => document.getElementById('fig-steps').data[0].x")
    assert len(set(zip(*x, strict=True))) == PLAN.world * PLAN.steps
    assert page.locator("#fig-steps .xaxislayer-above .xtick2").count() == PLAN.steps  # step names, grouped
    shot(page, "34-steps-per-rank", full_page=True)


def test_ranks_page_names_the_latest_arriver(page: Any, late_server: tuple[str, str], shot: Any) -> None:
    url, run = late_server
    page.goto(f"{url}/runs/{run}/ranks")
    page.wait_for_selector("#ranks-table")
    summary = " ".join(page.locator("#ranks-summary").inner_text().split())
    assert f"straggler: rank {PLAN.late_rank}" in summary
    assert f"latest arriver: rank {PLAN.late_rank}, last to {PLAN.steps} of {PLAN.steps} matched" in summary
    straggler = page.locator("tr.rank-row.straggler")
    assert straggler.count() == 1 and straggler.get_attribute("data-rank") == str(PLAN.late_rank)
    why = " ".join(page.locator(f"#straggler-evidence li[data-rank='{PLAN.late_rank}']").inner_text().split())
    arrivals = sorted(PLAN.a2a_start_us(0, r) for r in range(PLAN.world))  # launch 30 µs before: same lateness
    late_us = PLAN.a2a_start_us(0, PLAN.late_rank) - arrivals[(PLAN.world - 1) // 2]
    assert f"arrives {late_us // 1000}.{late_us % 1000:03d} ms after the median rank at alltoall (last to" in why
    assert f"kernel {EXTRA} takes 3.000 ms more than on rank" in why
    shot(page, "34-ranks-latest-arriver", full_page=True)
    page.click("#rank-compare-link")
    page.wait_for_selector("#rank-compare-summary")
    assert f"rank {PLAN.late_rank} against" in page.locator("#rank-compare-summary").inner_text()


def test_overview_gaps_have_a_rank_column(page: Any, late_server: tuple[str, str], shot: Any) -> None:
    url, run = late_server
    page.goto(f"{url}/runs/{run}")
    page.wait_for_selector("#gaps")
    assert page.locator("#gaps thead th").first.inner_text() == "Rank"
    ranks = [c.inner_text() for c in page.locator("#gaps td.gap-rank").all()]
    assert ranks and all(r.isdigit() and int(r) < PLAN.world for r in ranks)
    shot(page, "34-overview-gaps-rank")
