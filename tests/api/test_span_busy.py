"""Span, device busy and gaps on the shapes issue 34 met (points 3, 4, 8): profiler markers past the real
events, kernels overlapping on one stream without metadata, CUDA-graph launches without kernels, a 1 ns gap.
Every number is checked against the independent reading of tests/helpers/span_traces.py (json + decimal)."""

from __future__ import annotations

import html
import re
from typing import Any

from fastapi.testclient import TestClient

from explorer.analysis.breakdown import MIN_GAP_NS
from tests.api.conftest import Uploader
from tests.helpers.span_traces import (
    GRAPH_LAUNCHES,
    all_bounds,
    device_intervals,
    dumps,
    gaps_ns,
    graph_trace,
    markers_trace,
    overlap_trace,
    pct_text,
    real_bounds,
    short_gap_trace,
    union_ns,
)


def _ingest(upload: Uploader, name: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    run = upload(files=[(f"{name}.json", dumps(events))], name=name)
    assert run["status"] == "ready", run
    return run


def _card(page: str, card_id: str) -> str:
    """The text of one overview card (tags dropped, entities decoded)."""
    m = re.search(rf'<div class="card[^"]*" id="{card_id}">(.*?)</div></div>', page, re.S)
    assert m, card_id
    return html.unescape(re.sub(r"<[^>]+>", " ", m.group(1)))


def test_markers_do_not_make_the_span(client: TestClient, upload: Uploader) -> None:
    events = markers_trace()
    run = _ingest(upload, "markers", events)
    lo, hi = real_bounds(events)
    all_lo, all_hi = all_bounds(events)
    assert (all_lo, all_hi) != (lo, hi)  # the markers reach past the real events on both sides
    s = run["summary"]
    assert s["span_ns"] == hi - lo == 10_050_125_000 // 1000
    assert s["end_ns"] - s["start_ns"] == s["span_ns"]
    assert (s["start_ns"] - s["extent_start_ns"], s["extent_end_ns"] - s["end_ns"]) == (lo - all_lo, all_hi - hi)

    bd = client.get(f"/api/runs/{run['id']}/breakdown").json()
    (busy,) = device_intervals(events).values()
    (device,) = bd["devices"]
    assert device["busy_ns"] == union_ns(busy) and device["idle_ns"] == hi - lo - union_ns(busy)
    assert f"{device['busy_pct']:.1f} %" == pct_text(union_ns(busy), hi - lo) == "98.0 %"
    other = {r["lane"]: r for r in bd["lanes"]}["other"]  # the profiler's span is drawn, not busy time
    assert (other["busy_ns"], other["slices"], other["excluded_slices"]) == (0, 0, 1)

    page = client.get(f"/runs/{run['id']}").text
    assert pct_text(union_ns(busy), hi - lo) in _card(page, "device-busy")
    timeline = client.get(f"/runs/{run['id']}/timeline").text  # opens on the span; zooming out reaches the markers
    assert f'data-span="{hi - lo}" data-extent-lo="{all_lo - lo}" data-extent-hi="{all_hi - lo}"' in timeline
    found = client.get(f"/api/runs/{run['id']}/search?q=PyTorch%20Profiler").json()["matches"]
    assert [(m["name"], m["ts"]) for m in found] == [("PyTorch Profiler (0)", all_lo - lo)]  # kept, before 0
    window = client.get(f"/api/runs/{run['id']}/timeline?start_ns={all_lo - lo}&end_ns={all_hi - lo}&width_px=800")
    assert window.status_code == 200, window.text


def test_overlapping_kernels_on_one_stream_are_one_device(client: TestClient, upload: Uploader) -> None:
    events = overlap_trace()
    run = _ingest(upload, "overlap", events)
    lo, hi = real_bounds(events)
    assert run["summary"]["span_ns"] == hi - lo
    (busy,) = device_intervals(events).values()
    assert union_ns(busy) < sum(b - a for a, b in busy)  # the overlap would count twice in a sum
    bd = client.get(f"/api/runs/{run['id']}/breakdown").json()
    assert [(d["device"], d["busy_ns"], d["executions"]) for d in bd["devices"]] == [("GPU 0", union_ns(busy), 3)]
    assert bd["devices"][0]["idle_ns"] == hi - lo - union_ns(busy) <= hi - lo
    assert bd["gaps"]["total_ns"] == sum(gaps_ns(busy)) <= hi - lo
    assert bd["gaps"]["count"] == len(gaps_ns(busy)) == 1
    labels = sorted(t["label"] for t in client.get(f"/api/runs/{run['id']}/tracks").json()["tracks"]
                    if t["lane"] == "hardware")
    assert labels == ["GPU 0 · stream 7", "GPU 0 · stream 7 (overlap 1)"]
    card = _card(client.get(f"/runs/{run['id']}").text, "device-busy")
    assert pct_text(union_ns(busy), hi - lo) in card and "1 device" in card and "devices" not in card


def test_graph_launches_without_kernels_say_so(client: TestClient, upload: Uploader) -> None:
    events = graph_trace()
    run = _ingest(upload, "graphs", events)
    launches = sum(1 for e in events if e.get("name") == "cudaGraphLaunch")
    assert launches == GRAPH_LAUNCHES
    bd = client.get(f"/api/runs/{run['id']}/breakdown").json()
    assert bd["graphs"] == {"launches": launches, "without_device_work": launches, "hides_device_work": True}
    lo, hi = real_bounds(events)
    (busy,) = device_intervals(events).values()
    assert bd["devices"][0]["busy_ns"] == union_ns(busy) and 100 * union_ns(busy) < hi - lo  # ~0 %: one memcpy
    card = _card(client.get(f"/runs/{run['id']}").text, "device-busy")
    assert "no kernels" in card and f"inside {launches} CUDA graph launches" in card
    assert pct_text(union_ns(busy), hi - lo) not in card  # no 0.0 % busy
    note = html.unescape(re.sub(r"<[^>]+>", "", client.get(f"/runs/{run['id']}").text.split('id="graph-note"')[1]))
    assert f"No kernels: the device work runs inside {launches} CUDA graph launches" in note
    assert "--enforce-eager" in note and "_init_for_cuda_graphs()" in note


def test_graph_launches_with_their_kernels_show_busy(client: TestClient, upload: Uploader) -> None:
    events = graph_trace(kernels=True)
    run = _ingest(upload, "graphs-seen", events)
    bd = client.get(f"/api/runs/{run['id']}/breakdown").json()
    assert bd["graphs"] == {"launches": GRAPH_LAUNCHES, "without_device_work": 0, "hides_device_work": False}
    lo, hi = real_bounds(events)
    (busy,) = device_intervals(events).values()
    card = _card(client.get(f"/runs/{run['id']}").text, "device-busy")
    assert "no kernels" not in card and pct_text(union_ns(busy), hi - lo) in card
    assert 'id="graph-note"' not in client.get(f"/runs/{run['id']}").text


def test_gaps_under_the_minimum_are_counted_not_listed(client: TestClient, upload: Uploader) -> None:
    events = short_gap_trace()
    run = _ingest(upload, "short-gap", events)
    (busy,) = device_intervals(events).values()
    gaps = gaps_ns(busy)
    assert sorted(gaps) == [1, 9_999]
    bd = client.get(f"/api/runs/{run['id']}/breakdown").json()["gaps"]
    assert (bd["count"], bd["total_ns"]) == (len(gaps), sum(gaps))
    assert [g["dur_ns"] for g in bd["largest"]] == [g for g in gaps if g >= MIN_GAP_NS] == [9_999]
    assert (bd["short_count"], bd["short_ns"], bd["min_gap_ns"]) == (1, 1, 1_000)
    page = client.get(f"/runs/{run['id']}").text
    assert "1 under 1.000 µs not listed" in page and page.count('class="gap-row"') == 1
