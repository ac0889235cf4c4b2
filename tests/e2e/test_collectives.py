"""End-to-end: the collectives page and the timeline's collectives overlay in a browser, on the
constructed 4-rank run where rank 2 launches every all-reduce 5 ms late: the table sorts, names rank 2
as the last arriver, links each collective to the timeline, and the overlay joins the four ranks'
kernels of one collective (toggled from the toolbar, kept in the URL)."""

from __future__ import annotations

from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from tests.analysis.collectives.synthetic import straggler_calls, write_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def coll_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    files = write_run(tmp_path_factory.mktemp("e2e-colls"), {r: straggler_calls(r) for r in range(4)})
    return ingest_paths(server.state.store, files, "4-rank straggler").id


def test_collectives_page_sorts_and_names_the_last_arriver(page: Any, server: Any, coll_run: str, shot: Any) -> None:
    page.goto(f"{server.url}/runs/{coll_run}/collectives")
    page.wait_for_selector("body[data-init='1']")
    assert page.get_attribute("#tab-collectives", "class") == "on"
    rows = page.locator("#collectives-table tbody tr")
    assert rows.count() == 4
    assert page.locator("#collectives-table td.last-arriver").all_inner_texts() == ["rank 2"] * 4
    assert page.locator("#collective-mismatches").count() == 0
    shot(page, "collectives-page", full_page=True)
    page.click("#collectives-table th[data-col='seq'] a")
    page.wait_for_url("**sort=-seq**")
    assert page.eval_on_selector_all("#collectives-table tbody tr", "trs => trs.map(t => t.dataset.seq)") == ["3", "2", "1", "0"]
    page.click("#collectives-table th[data-col='seq'] a")
    page.wait_for_url("**sort=%2Bseq**")
    assert page.eval_on_selector_all("#collectives-table tbody tr", "trs => trs.map(t => t.dataset.seq)") == ["0", "1", "2", "3"]


def test_overlay_joins_the_ranks_kernels(page: Any, server: Any, coll_run: str, shot: Any) -> None:
    api = page.request.get(f"{server.url}/api/runs/{coll_run}/collectives?sort=%2Bseq").json()["rows"][0]
    page.goto(f"{server.url}/runs/{coll_run}/collectives?sort=%2Bseq")
    page.click("#collectives-table tbody tr:first-child a.tl-link")
    page.wait_for_url("**overlay=collectives**")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.is_checked("#tl-collectives")
    page.wait_for_function("() => TE.timelineApi.collectives().drawn.length > 0")
    state = page.evaluate("() => TE.timelineApi.collectives()")
    first = next(d for d in state["drawn"] if d["seq"] == 0)
    assert first["last_arriver"] == 2
    assert sorted(p["slice_id"] for p in first["points"]) == sorted(x["slice_id"] for x in api["ranks"])
    assert page.evaluate("() => TE.timelineApi.highlight()") == [api["timeline"]["hl_start"], api["timeline"]["hl_end"]]
    shot(page, "collectives-overlay")

    page.uncheck("#tl-collectives")
    page.wait_for_function("() => TE.timelineApi.collectives().drawn.length === 0")
    assert "overlay=" not in page.url
    page.check("#tl-collectives")
    page.wait_for_function("() => TE.timelineApi.collectives().drawn.length > 0")
    assert "overlay=collectives" in page.url


def test_no_overlay_toggle_without_collectives(page: Any, server: Any) -> None:
    page.goto(f"{server.url}/runs/{server.runs['fused']}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.locator("#tl-collectives").count() == 0 and page.locator("#tab-collectives").count() == 0
    assert page.evaluate("() => TE.timelineApi.collectives()") is None
