"""End-to-end: the runs table at 1600 px wide shows every row's rename/tags/delete controls and a failed
run's whole message, inside the viewport and unclipped; a screenshot for review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from explorer.errors import ExplorerError
from explorer.runs.ingest import ingest_paths

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WIDTH = 1600


@pytest.fixture(scope="module")
def failed_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    bad = tmp_path_factory.mktemp("runs-table") / "truncated_capture_of_a_long_training_job.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": ')  # cut mid-write
    with pytest.raises(ExplorerError):
        ingest_paths(server.state.store, [bad], "a failed upload with a rather long run name", keep_failed=True)
    failed = [r for r in server.state.store.catalog.list(status="failed")[0] if r.name.startswith("a failed upload")]
    server.state.store.catalog.set_tags(failed[0].id, ["baseline", "long-tag-for-width", "cuda"])
    return failed[0].id


def inside(box: dict[str, float] | None) -> bool:
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= WIDTH and box["width"] > 0


def unclipped(page: Any, selector: str) -> bool:
    """The element shows all of its content: nothing cut by overflow (an ellipsis or a scrolled box)."""
    return bool(page.eval_on_selector(selector, "e => e.scrollWidth <= e.clientWidth + 1"))


def test_runs_table_fits_1600_px(browser: Any, server: Any, failed_run: str, shot: Any, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    try:
        page.goto(server.url + "/")
        page.wait_for_selector("body[data-init='1']")
        page.mouse.move(5, 5)  # no row hovered: controls must show without it
        shot(page, "runs-table-1600", full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH  # no sideways scrolling
        rows = page.locator("#runs-table tr[data-run]")
        assert rows.count() >= 4
        for i in range(rows.count()):
            row = rows.nth(i)
            for act in ("rename", "tag", "delete"):
                button = row.locator(f"button[data-act='{act}']")
                assert button.is_visible() and inside(button.bounding_box()), (act, row.get_attribute("data-name"))
        message = server.state.store.get(failed_run).message
        assert message
        cell = page.locator(f"#runs-table tr[data-run='{failed_run}'] .run-message")
        assert cell.is_visible() and inside(cell.bounding_box())
        assert cell.inner_text() == message and unclipped(page, f"#runs-table tr[data-run='{failed_run}'] .run-message")
    finally:
        context.close()
