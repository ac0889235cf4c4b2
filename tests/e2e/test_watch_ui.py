"""`serve --watch`: a trace written into the watched folder shows up on the open runs page, no reload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import HOSTILE_NAMES, hostile_trace, serving

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_a_trace_written_into_the_watched_folder_appears_without_a_reload(
        page: Any, tmp_path: Path, shot: Any) -> None:
    from api.app import create_app
    from explorer.config import Settings

    logdir = tmp_path / "logs"
    (logdir / "exp").mkdir(parents=True)
    settings = Settings(data_dir=tmp_path / "data", watch_dirs=[logdir], watch_poll_s=0.2, watch_settle_s=0.3)
    with serving(create_app(settings)) as url:
        page.goto(url + "/")
        page.evaluate("window.__stillHere = 'same page'")
        assert page.locator("#runs-table tr[data-run]").count() == 0
        trace = hostile_trace()  # names that try to inject markup stay text in the new row
        trace["traceEvents"] = [e for e in trace["traceEvents"] if e["ph"] != "B"]
        (logdir / "exp" / f"{HOSTILE_NAMES[1]}.pt.trace.json").write_text(json.dumps(trace))
        row = page.locator("#runs-table tr[data-run][data-status=ready]")
        row.wait_for(timeout=20000)
        assert page.evaluate("window.__stillHere") == "same page"  # no navigation happened
        name = row.locator(".run-name a")
        assert name.inner_text() == f"logs/exp/{HOSTILE_NAMES[1]}"
        events = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
        assert row.locator("td.num").nth(1).inner_text() == f"{events:,}"
        shot(page, "runs-watch-live")
        name.click()
        page.wait_for_url(f"{url}/runs/*")
