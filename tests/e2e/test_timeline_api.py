"""End-to-end: the offline report answers search and range op tables by the server's rules (the same
answers as the API for the same run), and the page's colours are the one table in static/theme.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest

from explorer.config import PROJECT_ROOT
from tests.e2e.test_report_and_xss import write_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OP_FIELDS = ("name", "calls", "cpu_total_ns", "self_cpu_ns", "self_device_ns", "device_total_ns", "cpu_avg_ns")
SEARCHES = [("aten::", False), ("GELU", False), ("^aten::(add|mul)", True), ("ATEN", True), ("launch", False)]


def api(server: Any, path: str, **query: Any) -> Any:
    with urlopen(f"{server.url}{path}?{urlencode(query)}") as resp:
        return json.loads(resp.read())


@pytest.fixture
def report_page(offline_page: Any, server: Any, tmp_path: Path) -> Any:
    report = write_report(server, server.runs["synth"], tmp_path / "report.html")
    offline_page.goto(report.as_uri())
    offline_page.wait_for_selector("#timeline[data-ready='1']")
    return offline_page


def test_offline_range_ops_are_the_servers(report_page: Any, server: Any) -> None:
    rid = server.runs["synth"]
    span = int(api(server, f"/api/runs/{rid}")["summary"]["span_ns"])
    ranges = [(0, span + 1), (span // 5, span // 2), (span // 3, span // 3 + span // 50), (span // 2, span // 2 + 10)]
    counted = 0
    for a, b in ranges:
        want = api(server, f"/api/runs/{rid}/ops", limit=200, start_ns=a, end_ns=b)["rows"]
        counted += len(want)
        got = report_page.evaluate("([a, b]) => TE.timelineApi.source.ops(a, b)", [a, b])["rows"]
        assert [{k: r[k] for k in OP_FIELDS} for r in got] == [{k: r[k] for k in OP_FIELDS} for r in want], (a, b)
    assert counted > len(ranges)  # the ranges hold ops
    whole = report_page.evaluate("([a, b]) => TE.timelineApi.source.ops(a, b)", [0, span + 1])["rows"]
    assert whole and all(r["self_cpu_ns"] is not None for r in whole)  # offline self CPU was null before


def test_offline_search_is_the_servers(report_page: Any, server: Any) -> None:
    rid = server.runs["synth"]
    for q, regex in SEARCHES:
        want = api(server, f"/api/runs/{rid}/search", q=q, limit=5000, **({"regex": 1} if regex else {}))
        got = report_page.evaluate("([q, regex]) => TE.timelineApi.source.search(q, {regex: regex})", [q, regex])
        assert got == want, q
    assert api(server, f"/api/runs/{rid}/search", q="aten::", limit=1)["count"] > 0  # the cases are not all empty


def test_range_panel_offline_shows_self_cpu(report_page: Any, shot: Any) -> None:
    page = report_page
    page.locator("#tl-canvas").scroll_into_view_if_needed()
    box = page.locator("#tl-canvas").bounding_box()
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + 300, box["y"] + 80)
    page.mouse.down()
    page.mouse.move(box["x"] + 900, box["y"] + 80, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_selector("#tl-range-ops tbody tr")
    self_cpu = page.eval_on_selector_all("#tl-range-ops tbody td:nth-child(4)", "tds => tds.map(td => td.textContent)")
    assert self_cpu and "–" not in self_cpu
    shot(page, "15-report-range-ops")


def test_page_colours_are_the_theme_table(page: Any, server: Any) -> None:
    table = json.loads((PROJECT_ROOT / "static" / "theme.json").read_text(encoding="utf-8"))
    page.goto(f"{server.url}/runs/{server.runs['synth']}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.evaluate("() => TE.LANE_COLORS") == table["lanes"]
    css = page.evaluate("""(lanes) => lanes.map((l) =>
        getComputedStyle(document.documentElement).getPropertyValue('--' + l).trim())""", list(table["lanes"]))
    assert css == list(table["lanes"].values())


def test_offline_chains_and_parents_are_the_servers(report_page: Any, server: Any) -> None:
    rid = server.runs["synth"]
    ids = report_page.evaluate("() => TE.timelineApi.sliceIds()")
    linked = 0
    for sid in ids[:: max(1, len(ids) // 60)]:
        want = api(server, f"/api/runs/{rid}/events/{sid}")
        got = report_page.evaluate("(id) => TE.timelineApi.source.event(id)", sid)
        assert got["chain"] == want["chain"], sid
        drawn = [p["slice_id"] for p in want["parents"] if p["slice_id"] in set(ids)]
        assert [p["slice_id"] for p in got["parents"]] == drawn[: len(got["parents"])], sid
        linked += len(want["chain"]) > 1
    assert linked > 5  # the sample holds linked chains, not only lone slices
