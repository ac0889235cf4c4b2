"""Issue 14 in a real browser: a multi-rank run's timeline opens grouped by rank (groups in rank order, every
track in its rank's group), `group: lane` sticks in the link, and the ranks page marks the straggler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from api.app import create_app
from bench.synth_ranks import RankPlan, write_rank_traces
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from tests.e2e.conftest import serving

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PLAN = RankPlan(world=4, steps=3, units=4, late_rank=2, late_ns=5_000_000)


@pytest.fixture(scope="module")
def rank_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server of its own holding the constructed 4-rank run (rank 2 late to every all-reduce)."""
    tmp = tmp_path_factory.mktemp("rank-ui")
    # given out of rank order: the grouping, not the upload order, puts rank 10-style keys right
    paths = write_rank_traces(tmp / "traces", PLAN)[::-1]
    app = create_app(Settings(data_dir=tmp / "data"))
    run = ingest_paths(app.state.explorer.store, paths, "four ranks").id
    with serving(app) as url:
        yield url, run


def _rows(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("() => TE.timelineApi.rows()")  # type: ignore[no-any-return]


def test_timeline_groups_by_rank(page: Any, rank_server: tuple[str, str], shot: Any) -> None:
    url, run = rank_server
    tracks = {t["track_id"]: t for t in page.request.get(f"{url}/api/runs/{run}/tracks").json()["tracks"]}
    page.goto(f"{url}/runs/{run}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.idle() && TE.timelineApi.rows().length > 0")
    assert page.locator("#tl-group").input_value() == "rank"
    rows = _rows(page)
    headers = [r["key"] for r in rows if r["kind"] != "track"]
    assert headers == ["rank 0", "rank 1", "rank 2", "rank 3"]
    current = None
    for r in rows:
        if r["kind"] != "track":
            current = r["key"]
        else:
            assert f"rank {tracks[r['trackId']]['rank']}" == current
    shot(page, "14-timeline-group-rank")
    page.select_option("#tl-group", "lane")
    page.wait_for_url("**group=lane**")
    page.reload()
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.idle() && TE.timelineApi.rows().length > 0")
    assert page.locator("#tl-group").input_value() == "lane"
    assert [r["key"] for r in _rows(page) if r["kind"] != "track"][:3] == ["framework", "runtime", "hardware"]


def test_ranks_page_marks_the_straggler(page: Any, rank_server: tuple[str, str], shot: Any) -> None:
    url, run = rank_server
    page.goto(f"{url}/runs/{run}")
    page.click("#tab-ranks")
    page.wait_for_selector("#ranks-table")
    summary = " ".join(page.locator("#ranks-summary").inner_text().split())
    assert "straggler: rank 2 · latest arriver: rank 2, last to 3 of 3 matched collectives" in summary
    straggler = page.locator("tr.rank-row.straggler")
    assert straggler.count() == 1 and straggler.get_attribute("data-rank") == "2"
    assert straggler.locator("td.evidence").inner_text().startswith("straggler")
    why = page.locator("#straggler-evidence li[data-rank='2']")
    evidence = why.inner_text()
    assert "arrives 5.000 ms after the median rank" in evidence
    assert "kernel ampere_sgemm_128x64_tn takes 15.000 ms more than on rank 0" in evidence
    page.wait_for_selector("#fig-ranks .main-svg")
    bars = page.evaluate("() => document.getElementById('fig-ranks').data[0].x")
    assert bars == ["rank 0", "rank 1", "rank 2 (straggler)", "rank 3"]
    shot(page, "14-ranks-page")
    why.locator("a").click()
    page.wait_for_selector("#rank-compare-kernels")
    assert "rank 2 against rank 0 (baseline)" in page.locator("#rank-compare-summary").inner_text()
