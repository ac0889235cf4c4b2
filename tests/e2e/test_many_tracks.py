"""End-to-end: the timeline of a run of 100,000 distinct thread ids. Windows ask only for the tracks in view
(plus a margin); the framework lane shows a "+N tracks not drawn" summary row with the busy time of the
rest; the first tracks are drawn, and scrolling fetches the newly visible ones."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from bench.window import write_many_threads_trace
from tests.e2e.conftest import SCREENSHOT_DIR, guard_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = 100_000
VIEW_W, VIEW_H = 1400, 900


@pytest.fixture(scope="module")
def many_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[int, Decimal]]:
    from explorer.runs.ingest import ingest_paths

    path = tmp_path_factory.mktemp("many") / "many_threads.json"
    write_many_threads_trace(path, THREADS)
    starts = {e["tid"]: e["ts"] for e in json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
              if e["ph"] == "X"}
    return ingest_paths(server.state.store, [path], "many threads").id, starts


def _timeline_requests(page: Any) -> list[str]:
    found: list[str] = []
    page.on("request", lambda r: found.append(r.url) if "/timeline?" in r.url else None)
    return found


def test_many_tracks_summary_row_first_tracks_and_scroll_fetches(server: Any, browser: Any,
                                                                 many_run: tuple[str, dict[int, Decimal]]) -> None:
    run_id, starts = many_run
    tracks = server.state.store.table(run_id, "tracks")
    thread_of = {t: int(label.rsplit(" ", 1)[-1]) for t, label in
                 zip(tracks.column("track_id").to_pylist(), tracks.column("thread").to_pylist(), strict=True)}
    page = browser.new_page(viewport={"width": VIEW_W, "height": VIEW_H})
    guard = guard_page(page)
    asked = _timeline_requests(page)
    page.goto(f"{server.url}/runs/{run_id}/timeline")
    page.wait_for_selector("[data-ready='1']", timeout=60_000)
    api = "window.TE.timelineApi"
    assert page.evaluate(f"{api}.viewportMode()")
    page.wait_for_function(f"() => {api}.summaries().length > 0")
    summaries = page.evaluate(f"{api}.summaries()")
    held = page.evaluate(f"{api}.trackIdsWithData()")
    assert [s["lane"] for s in summaries] == ["framework"]
    assert summaries[0]["tracks"] + len(held) == THREADS  # every track: drawn, or counted in the summary
    rows = page.evaluate(f"{api}.rows()")
    kinds = [r["kind"] for r in rows[:3]]
    assert kinds == ["header", "summary", "track"]  # the summary row right under the lane header
    in_view = [r["trackId"] for r in rows if r["kind"] == "track" and r["top"] < VIEW_H]
    assert in_view and set(in_view) <= set(held)
    assert len(held) < 200  # the tracks in view and a margin, not the run's 100,000
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / "many_tracks_top.png"))
    before = page.evaluate(f"{api}.fetches()")
    page.evaluate(f"{api}.setWindow(0, 120000)")  # the first 120 µs: the first threads' ops are boxes
    page.wait_for_function(f"() => {api}.fetches() > {before} && {api}.covered()", timeout=20_000)
    page.evaluate(f"{api}.drawNow()")
    drawn = page.evaluate(f"{api}.visibleSlices()")
    assert drawn and {s["name"] for s in drawn} <= {f"op{k}" for k in range(7)}, "the first tracks draw their ops"
    page.screenshot(path=str(SCREENSHOT_DIR / "many_tracks_zoomed.png"))

    before = page.evaluate(f"{api}.fetches()")
    n_requests = len(asked)
    target = next(r for r in rows if r["kind"] == "track" and r["top"] > 5000)
    page.evaluate(f"{api}.scrollTo({target['top'] - page.evaluate(f'{api}.bodyTop()')})")
    page.wait_for_function(f"() => {api}.fetches() > {before} && {api}.trackIdsWithData().includes({target['trackId']})",
                           timeout=20_000)
    assert len(asked) > n_requests and f"{target['trackId']}" in asked[-1].split("tracks=")[1].split(",")
    # zoom to where the scrolled-to thread runs (its op's start, from the file): its box is drawn
    tid = thread_of[target["trackId"]]
    at_ns = int((starts[tid] - min(starts.values())) * 1000)
    before = page.evaluate(f"{api}.fetches()")
    page.evaluate(f"{api}.setWindow({at_ns - 60_000}, {at_ns + 60_000})")
    page.wait_for_function(f"() => {api}.fetches() > {before} && {api}.covered()", timeout=20_000)
    page.evaluate(f"{api}.drawNow()")
    drawn = page.evaluate(f"{api}.visibleSlices()")
    assert f"op{(tid - 1) % 7}" in {s["name"] for s in drawn}
    page.screenshot(path=str(SCREENSHOT_DIR / "many_tracks_scrolled.png"))
    assert page.evaluate(f"{api}.summaries()")[0]["tracks"] + len(page.evaluate(f"{api}.trackIdsWithData()")) == THREADS
    guard.check()
    page.close()
