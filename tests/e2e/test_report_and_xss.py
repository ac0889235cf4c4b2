"""End-to-end: the self-contained report opened from disk with the network off, the share link, and a
trace whose names try to inject markup rendered as text on every page (no dialog may fire)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import pytest
from click.testing import CliRunner

from explorer.cli import main

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')


def write_report(server: Any, run_id: str, out: Path) -> Path:
    result = CliRunner().invoke(main, ["report", run_id, "-o", str(out), "--data-dir",
                                       str(server.state.settings.data_dir)])
    assert result.exit_code == 0, result.output
    return out


def test_report_file_opens_offline(offline_page: Any, server: Any, tmp_path: Path, shot: Any) -> None:
    page = offline_page
    report = write_report(server, server.runs["synth"], tmp_path / "report.html")
    page.goto(report.as_uri())
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_selector("#fig-lanes .main-svg")
    page.wait_for_selector("#fig-top-device .main-svg")
    assert page.inner_text("#run-name") == "synth"
    assert "aten::linear" in page.inner_text("#ops-table")
    assert page.locator("#ops-table tbody tr").count() >= 10
    # client-side sort and filter (no server to ask)
    page.click("#ops-table th[data-col='calls']")
    calls = [int(v) for v in page.eval_on_selector_all("#ops-table tbody td:nth-child(2)",
                                                       "tds => tds.map(td => td.dataset.v)")]
    assert calls == sorted(calls, reverse=True)
    page.fill("#ops-filter", "gelu")
    visible = page.eval_on_selector_all("#ops-table tbody tr", "trs => trs.filter(t => t.style.display !== 'none').length")
    assert visible == 2
    # the embedded timeline zooms and shows details from the snapshot
    page.locator("#tl-canvas").scroll_into_view_if_needed()
    span = page.evaluate("() => TE.timelineApi.view().span")
    page.locator("#tl-canvas").click(position={"x": 700, "y": 60})
    page.keyboard.press("w")
    assert page.evaluate("() => TE.timelineApi.view().span") < span
    # details offline: the report embeds each drawn slice's parent and args
    child = page.evaluate("""() => TE.timelineApi.sliceIds("aten::addmm")[0] ?? null""")
    assert child is not None
    page.evaluate(f"() => TE.timelineApi.select({child})")
    page.wait_for_function("() => document.getElementById('tl-detail-name')?.textContent === 'aten::addmm'")
    details = page.inner_text("#tl-details")
    assert "Args" in details and "External id" in details
    assert "Parents" in details and "aten::linear" in details
    shot(page, "10-report-offline", full_page=True)
    assert page.guard.external == []


def test_share_link_shows_report_read_only(page: Any, server: Any, shot: Any) -> None:
    rid = server.runs["synth"]
    req = Request(f"{server.url}/api/runs/{rid}/share", method="POST")
    with urlopen(req) as resp:
        url = json.loads(resp.read())["url"]
    page.goto(server.url + url)
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.inner_text(".readonly-badge") == "read-only"
    assert page.inner_text("#run-name") == "synth"
    shot(page, "11-share-link")


def test_share_button_creates_link(page: Any, server: Any) -> None:
    page.goto(f"{server.url}/runs/{server.runs['fused']}")
    page.click("#share-btn")
    page.wait_for_selector("#share-link")
    assert "/s/" in page.inner_text("#share-link")


def assert_inert(page: Any) -> None:
    """No element was made from the hostile names: no <img src=x>, no executable script holding them."""
    assert page.locator("img[src='x']").count() == 0
    assert page.evaluate("""() => Array.from(document.scripts).filter(s =>
        (!s.type || s.type.includes("javascript")) && s.textContent.includes("alert(1)")).length""") == 0


def test_hostile_names_render_as_text(page: Any, server: Any, tmp_path: Path, browser: Any, shot: Any) -> None:
    rid, other = server.runs["hostile"], server.runs["fused"]
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-init='1']")
    assert_inert(page)

    page.goto(f"{server.url}/runs/{rid}")
    page.wait_for_selector("#fig-top-cpu .main-svg")
    assert HOSTILE[0] in page.inner_text("#warnings") or page.locator("#warnings li").count() >= 1
    assert_inert(page)

    page.goto(f"{server.url}/runs/{rid}/ops")
    page.wait_for_selector("#fig-ops .main-svg")
    names = page.eval_on_selector_all("#ops-table tbody td.name", "tds => tds.map(td => td.textContent)")
    assert HOSTILE[0] in names and HOSTILE[1] in names
    chart = page.inner_text("#fig-ops")
    assert HOSTILE[0] in chart and HOSTILE[1] in chart  # plotly shows the names as text too
    assert_inert(page)
    shot(page, "12-hostile-ops", full_page=True)

    page.goto(f"{server.url}/runs/{rid}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.fill("#tl-search", "<script>")
    page.press("#tl-search", "Enter")
    page.wait_for_selector("#tl-details.open #tl-detail-name")
    assert page.inner_text("#tl-detail-name") == HOSTILE[0]
    assert HOSTILE[1] in page.inner_text("#tl-details")  # the arg value, as text
    box = page.locator("#tl-canvas").bounding_box()
    page.mouse.move(box["x"] + 600, box["y"] + 60)
    assert_inert(page)
    shot(page, "13-hostile-timeline")

    page.goto(f"{server.url}/compare?runs={rid},{other}")
    page.wait_for_selector("#fig-compare .main-svg")
    assert HOSTILE[0] in page.inner_text("#compare-table")
    assert_inert(page)

    page.goto(f"{server.url}/runs/{rid}/report")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert HOSTILE[1] in page.inner_text("#ops-table")
    assert_inert(page)
    assert page.guard.dialogs == []
