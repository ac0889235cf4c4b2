"""End-to-end: a run whose profiler markers lie before and after its real events opens the timeline on the
span (first to last real event), and zooming out reaches the markers (issue 34 point 3); screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from tests.helpers.span_traces import (
    GRAPH_LAUNCHES,
    all_bounds,
    dumps,
    graph_trace,
    markers_trace,
    ns,
    overlap_trace,
    real_bounds,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_timeline_opens_on_the_span_and_zooms_out_to_the_markers(page: Any, server: Any, shot: Any,
                                                                 tmp_path: Path) -> None:
    events = markers_trace()
    path = tmp_path / "markers.json"
    path.write_bytes(dumps(events))
    rid = ingest_paths(server.state.store, [path], "markers").id
    lo, hi = real_bounds(events)
    all_lo, all_hi = all_bounds(events)
    page.goto(f"{server.url}/runs/{rid}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.evaluate("() => [TE.timelineApi.view().start, TE.timelineApi.view().end]") == [0, hi - lo]
    shot(page, "span-markers-timeline-default")
    for _ in range(12):
        page.keyboard.press("s")
    start, end = page.evaluate("() => [TE.timelineApi.view().start, TE.timelineApi.view().end]")
    assert start <= all_lo - lo and end >= all_hi - lo  # the profiler's span and its end mark are in reach
    page.wait_for_function("() => TE.timelineApi.covered()")
    assert sorted(page.evaluate("() => TE.timelineApi.instantsInData()")) == sorted(
        [e["name"], ns(e["ts"]) - lo] for e in events if e.get("ph") == "i")  # both marks, one before 0
    assert page.inner_text("#tl-window").startswith(f"-{(lo - all_lo) / 1e6:.3f} ms")
    shot(page, "span-markers-timeline-zoomed-out")
    page.click("#tl-reset")
    assert page.evaluate("() => [TE.timelineApi.view().start, TE.timelineApi.view().end]") == [0, hi - lo]
    page.goto(f"{server.url}/runs/{rid}")
    page.wait_for_selector("#cards")
    shot(page, "span-markers-overview", full_page=True)


def test_overview_cards_of_graph_and_overlap_runs(page: Any, server: Any, shot: Any, tmp_path: Path) -> None:
    """The device card of a graph-launch run without kernels says why, in the browser; screenshots of both."""
    for name, events in (("graphs", graph_trace()), ("overlap", overlap_trace())):
        path = tmp_path / f"{name}.json"
        path.write_bytes(dumps(events))
        rid = ingest_paths(server.state.store, [path], name).id
        page.goto(f"{server.url}/runs/{rid}")
        page.wait_for_selector("#fig-lanes .main-svg")
        card = page.inner_text("#device-busy")
        if name == "graphs":
            assert "no kernels" in card and f"inside {GRAPH_LAUNCHES} CUDA graph launches" in card
        else:
            assert "1 device" in card and "no kernels" not in card
        shot(page, f"span-{name}-overview", full_page=True)
