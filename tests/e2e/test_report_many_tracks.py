"""End-to-end: the offline report of a run of 5,000 distinct thread ids, opened from disk with the network
off. Its timeline holds the tracks of the report's bounded window (report.SNAPSHOT_HEIGHT_PX worth) and, in
lane grouping, draws the framework lane's "+N tracks not drawn" summary row right under the lane header;
the tracks drawn and the summarised ones add up to every thread of the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.window import write_many_threads_trace
from explorer.report.html import SNAPSHOT_HEIGHT_PX, write_report
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THREADS = 5000
ROW_PX = 22  # the height budget per track (docs/API.md "Timeline window")
API = "window.TE.timelineApi"


def test_report_of_many_threads_draws_the_summary_row(offline_page: Any, tmp_path: Path, shot: Any) -> None:
    trace = tmp_path / "many_threads.json"
    write_many_threads_trace(trace, THREADS)
    threads = {e["tid"] for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"}
    store = RunStore(tmp_path / "data")
    run = ingest_paths(store, [trace], "many threads")
    report = tmp_path / "report.html"
    write_report(Run.of(store, run.id), report)

    page = offline_page
    page.goto(report.as_uri())
    page.wait_for_selector("#timeline[data-ready='1']", timeout=60_000)
    assert not page.evaluate(f"{API}.viewportMode()")  # a report has no server to ask for more tracks
    summaries = page.evaluate(f"{API}.summaries()")
    held = page.evaluate(f"{API}.trackIdsWithData()")
    assert len(held) == SNAPSHOT_HEIGHT_PX // ROW_PX
    assert [s["lane"] for s in summaries] == ["framework"]
    assert summaries[0]["tracks"] + len(held) == len(threads) == THREADS
    rows = page.evaluate(f"{API}.rows()")
    assert [r["kind"] for r in rows[:3]] == ["header", "summary", "track"]  # the summary under the lane header
    drawn = [r["trackId"] for r in rows if r["kind"] == "track"]
    assert sorted(drawn) == sorted(held)  # the report lays out the tracks it holds, no empty rows for the rest
    page.locator("#timeline").scroll_into_view_if_needed()
    page.evaluate(f"{API}.drawNow()")
    shot(page, "report_many_tracks")
