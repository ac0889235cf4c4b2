"""End-to-end: a device gap's host evidence on the timeline, on the constructed GPU-like Kineto trace of
tests/analysis/test_gap_evidence.py (one gap per cause on one stream; a DataLoader annotation with a
sync inside it covers the first; a `<script>` op sits in the last). The overview's gap link opens the
timeline with the gap's cause on the highlight band; hovering the empty stream inside a gap shows the gap,
its cause and its top host activities; a click shows the evidence in the details panel. Expected values
come from the raw trace events (Decimal µs -> ns), not from the API."""

from __future__ import annotations

import json
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from tests.analysis.test_gap_evidence import LOADER, cause_events, coverage, independent_gaps, ns

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def gap_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    events = cause_events()
    path = tmp_path_factory.mktemp("gap-tooltip") / "causes.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return ingest_paths(server.state.store, [path], "gap causes").id, events


def origin(events: list[dict[str, Any]]) -> int:
    return min(ns(e["ts"]) for e in events if e.get("ph") == "X")


def gap_at(events: list[dict[str, Any]], start_us: int) -> tuple[int, int]:
    """The gap (absolute ns) between executions that starts at `start_us`, from the raw events."""
    return next(g for g in independent_gaps(events) if g[0] == ns(start_us))


def top_activities(events: list[dict[str, Any]], gs: int, ge: int, n: int) -> list[tuple[str, int]]:
    """The n host activities covering most of [gs, ge): (name, covered ns)."""
    cover = coverage(events, gs, ge)
    return sorted(((k[0], v) for k, v in cover.items()), key=lambda kv: (-kv[1], kv[0]))[:n]


def hover_gap(page: Any, start: int, end: int) -> tuple[float, float]:
    """Move the pointer over the middle of [start, end] (relative ns) on the hardware track; the page point."""
    api = "TE.timelineApi"
    row = next(r for r in page.evaluate(f"() => {api}.rows()") if r["kind"] == "track" and r["lane"] == "hardware")
    v, plot_w, gutter = page.evaluate(f"() => [{api}.view(), {api}.plotWidth(), {api}.gutter]")
    x = gutter + ((start + end) / 2 - v["start"]) / v["span"] * plot_w
    assert page.evaluate(f"([x, t]) => {api}.gapAt(x, t)", [x, row["trackId"]]) is not None
    box = page.locator("#tl-canvas").bounding_box()
    px, py = box["x"] + x, box["y"] + row["top"] + 8
    page.mouse.move(px, py)
    page.wait_for_function(f"() => {api}.tooltip() !== null")
    return px, py


def test_gap_link_caption_tooltip_and_details(page: Any, server: Any, gap_run: tuple[str, list[dict[str, Any]]],
                                             shot: Any) -> None:
    run_id, events = gap_run
    o = origin(events)
    gs, ge = gap_at(events, 10)
    cover = coverage(events, gs, ge)
    detail = f"host busy: {LOADER} ({cover[LOADER, 1, 1] * 100 // (ge - gs)} %)"

    page.goto(f"{server.url}/runs/{run_id}")
    page.wait_for_selector("body[data-init='1']")
    page.click("#gaps tbody tr[data-cause='host busy'] a.gap-link")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.gapCaption() !== null")
    assert page.evaluate("() => TE.timelineApi.highlight()") == [gs - o, ge - o]
    assert page.evaluate("() => TE.timelineApi.gapCaption()") == detail
    shot(page, "gap-band-caption")

    hover_gap(page, gs - o, ge - o)
    tip = page.evaluate("() => TE.timelineApi.tooltip()").split("\n")
    dur = page.evaluate("(n) => TE.fmtNs(n)", ge - gs)
    assert tip[0] == f"idle gap {dur} · {detail}"
    assert "host busy" in tip[0] and LOADER in tip[0]
    expected = top_activities(events, gs, ge, 3)
    assert [line.split(" ")[0] for line in tip[1:4]] == [name for name, _ in expected]
    for line, (name, covered) in zip(tip[1:4], expected, strict=True):
        assert line.startswith(f"{name} {page.evaluate('(n) => TE.fmtNs(n)', covered)} ({covered * 100 // (ge - gs)} %)")
    shot(page, "gap-tooltip")

    page.mouse.click(*hover_gap(page, gs - o, ge - o))
    page.wait_for_selector("#tl-gap-cause")
    assert page.inner_text("#tl-gap-cause") == detail
    items = page.locator("#tl-gap-activity li")
    assert items.count() == len(cover)
    assert LOADER in items.nth(0).inner_text()
    assert page.evaluate("() => TE.timelineApi.detailsGap().start") == gs - o
    shot(page, "gap-details")
    items.nth(0).click()  # the loader's slices: the one annotation, as a search match
    page.wait_for_function("() => TE.timelineApi.matches().length > 0")
    assert [m["name"] for m in page.evaluate("() => TE.timelineApi.matches()")] == [LOADER]
    page.keyboard.press("Escape")
    assert page.evaluate("() => TE.timelineApi.detailsGap()") is None


def test_gap_tooltip_only_on_empty_stream_and_escapes_names(page: Any, server: Any,
                                                             gap_run: tuple[str, list[dict[str, Any]]], shot: Any) -> None:
    run_id, events = gap_run
    o = origin(events)
    gs, ge = gap_at(events, 3050)  # launch latency; the hostile op runs on the host inside it
    assert HOSTILE in [name for name, _ in top_activities(events, gs, ge, 3)]
    page.goto(f"{server.url}/runs/{run_id}/timeline?start={gs - o - 50_000}&end={ge - o + 50_000}")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.gaps() !== null")
    assert page.evaluate("() => TE.timelineApi.gapCaption()") is None  # no highlight, no caption
    hover_gap(page, gs - o, ge - o)
    text = page.evaluate("() => TE.timelineApi.tooltip()")
    assert text.startswith("idle gap ") and "launch latency: cudaLaunchKernel" in text
    assert HOSTILE in text  # shown as text ...
    assert page.locator("#tl-tip script").count() == 0  # ... never as markup
    assert "&lt;script&gt;" in page.inner_html("#tl-tip")
    shot(page, "gap-tooltip-hostile")
    # over the kernel after the gap the tooltip is the kernel's, not the gap's
    k5 = next(s for s in page.evaluate("() => TE.timelineApi.visibleSlices()") if s["name"] == "k5")
    page.mouse.move(k5["x"], k5["y"])
    page.wait_for_function("() => (TE.timelineApi.tooltip() || '').startsWith('k5')")


def test_gap_matches_hardware_tracks_by_device_name(page: Any, server: Any, traces: Any) -> None:
    """The synthetic Kineto run names its GPU ("GPU 0", the track's device field) apart from its stream's
    label: the largest gap (from the raw events) is found on every hardware track of that device, on no
    host track."""
    events = json.loads(traces.synth.read_text())["traceEvents"]
    gs, ge = independent_gaps(events)[0]
    o = origin(events)
    mid = (gs + ge) // 2 - o
    page.goto(f"{server.url}/runs/{server.runs['synth']}/timeline?start={gs - o - (ge - gs)}&end={ge - o + (ge - gs)}")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.gaps() !== null")
    found = page.evaluate("""(mid) => {
      const api = TE.timelineApi, v = api.view(), x = api.gutter + (mid - v.start) / v.span * api.plotWidth();
      return api.rows().filter((r) => r.kind === "track").map((r) => [r.lane, api.gapAt(x, r.trackId)]); }""", mid)
    hardware = [g for lane, g in found if lane == "hardware"]
    assert hardware and all(g is not None and g["device"] == "GPU 0" for g in hardware)
    assert all(g["start"] == gs - o and g["end"] == ge - o for g in hardware)
    assert all(g is None for lane, g in found if lane != "hardware")
