"""GET /timeline on a run of 100,000 distinct thread ids: the window is bounded in total (the tracks that
fit `height_px` in full, one busy summary per lane for the rest), every track is accounted for, and the
busy time equals the union of the summarised threads' ops read from the trace file with decimal times."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from bench.window import write_many_threads_trace
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths

THREADS = 100_000
pytestmark = pytest.mark.slow
ROW_PX = 22  # the height budget per track (docs/API.md "Timeline window")


@dataclass
class ManyRun:
    client: TestClient
    id: str
    ops: dict[int, tuple[int, int]]  # tid -> (start, end) relative ns, from the file
    origin_ns: int


def _ns(us: Decimal) -> int:
    return int(us * 1000)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManyRun]:
    d = tmp_path_factory.mktemp("many")
    path = d / "many_threads.json"
    write_many_threads_trace(path, THREADS)
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    spans = {e["tid"]: (_ns(e["ts"]), _ns(e["ts"] + e["dur"])) for e in events if e["ph"] == "X"}
    origin = min(a for a, _ in spans.values())
    app = create_app(Settings(data_dir=d / "data"))
    with TestClient(app) as client:
        rec = ingest_paths(app.state.explorer.store, [path], "many threads")
        yield ManyRun(client, rec.id, {t: (a - origin, b - origin) for t, (a, b) in spans.items()}, origin)


def _union(intervals: list[tuple[int, int]], start: int, end: int) -> int:
    total, reach = 0, start
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, end)
        if b > a:
            total, reach = total + b - a, b
    return total


def _thread_of(many: ManyRun) -> dict[int, int]:
    tracks = many.client.get(f"/api/runs/{many.id}/tracks").json()["tracks"]
    return {t["track_id"]: int(t["thread"].rsplit(" ", 1)[-1]) for t in tracks}


def test_the_window_sends_what_fits_and_summarises_every_other_track(many: ManyRun) -> None:
    url = f"/api/runs/{many.id}/timeline"
    many.client.get(url)  # the run's index is built once; the budget is for the requests after it
    r = many.client.get(url, params={"width_px": 2000, "height_px": 1000})
    body = r.json()
    assert r.status_code == 200
    assert len(r.content) < 200_000, len(r.content)  # was ~18 MB: every track in full
    assert float(r.headers["server-timing"].split("dur=")[1]) < 2_000  # ms; was ~8 s
    assert len(body["tracks"]) == 1000 // ROW_PX
    assert body["tracks_summarised"] + len(body["tracks"]) == len(many.ops) == THREADS
    assert [(s["lane"], s["tracks"]) for s in body["summaries"]] == [("framework", THREADS - len(body["tracks"]))]
    thread_of = _thread_of(many)
    sent = {thread_of[t["track_id"]] for t in body["tracks"]}
    rest = [span for tid, span in many.ops.items() if tid not in sent]
    busy = body["summaries"][0]["busy_ns"]
    assert len(busy) == 2000 and sum(busy) == _union(rest, body["start_ns"], body["end_ns"])


def test_asked_tracks_come_in_full_and_the_summary_busy_is_exact_per_column(many: ManyRun) -> None:
    thread_of = _thread_of(many)
    track_of = {tid: track for track, tid in thread_of.items()}
    asked = [track_of[t] for t in (50_000, 50_001, 99_999)]
    start, end, width = 150_000_000, 150_020_000, 40  # 20 µs around thread 50,000
    r = many.client.get(f"/api/runs/{many.id}/timeline", params={
        "start_ns": start, "end_ns": end, "width_px": width, "tracks": ",".join(map(str, asked))})
    body = r.json()
    assert [t["track_id"] for t in body["tracks"]] == asked
    for t in body["tracks"]:
        a, b = many.ops[thread_of[t["track_id"]]]
        inside = b > start and a < end
        assert (t["slices"]["ts"], t["slices"]["dur"]) == (([a], [b - a]) if inside else ([], []))
    assert body["tracks_summarised"] == THREADS - 3
    rest = [span for tid, span in many.ops.items() if track_of[tid] not in asked]
    edges = [start + p * (end - start) // width for p in range(width + 1)]
    expected = [_union(rest, edges[p], edges[p + 1]) for p in range(width)]
    assert body["summaries"][0]["busy_ns"] == expected and sum(expected) > 0


@pytest.mark.parametrize("height", [0, 20_001])
def test_height_px_is_bounded(many: ManyRun, height: int) -> None:
    r = many.client.get(f"/api/runs/{many.id}/timeline", params={"height_px": height})
    assert r.status_code == 422 and "Traceback" not in r.text


def test_the_track_listing_pages_in_the_timeline_order(many: ManyRun) -> None:
    url = f"/api/runs/{many.id}/tracks"
    everything = many.client.get(url).json()
    lane_rank = {"framework": 0, "runtime": 1, "hardware": 2, "counter": 3, "other": 4}
    ordered = sorted(everything["tracks"], key=lambda t: (lane_rank[t["lane"]], t["sort_key"], t["track_id"]))
    assert everything["total"] == len(everything["tracks"]) == THREADS
    first = many.client.get(url, params={"limit": 100})
    assert len(first.content) < 50_000  # the whole listing is ~20 MB
    assert first.json()["tracks"] == ordered[:100] and first.json()["total"] == THREADS
    last = many.client.get(url, params={"limit": 100, "offset": THREADS - 30}).json()
    assert last["tracks"] == ordered[-30:]
    assert many.client.get(url, params={"limit": 100_001}).status_code == 422
