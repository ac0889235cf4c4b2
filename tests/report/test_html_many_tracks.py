"""The offline report of a run of 5,000 distinct thread ids: its timeline snapshot is the server's bounded
window (report.SNAPSHOT_HEIGHT_PX worth of tracks in full, the rest one busy summary per lane), so the
report's size does not grow with the track count; every track is accounted for, the listing holds exactly
the tracks drawn, the details and chains cover the slices held, and the summary's busy time equals the
union of the summarised threads' ops read from the trace file with decimal times."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from bench.window import write_many_threads_trace
from explorer.report.html import SNAPSHOT_HEIGHT_PX, build_snapshot, write_report
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore

THREADS = 5000
ROW_PX = 22  # the height budget per track (docs/API.md "Timeline window")


@dataclass
class ManyRun:
    store: RunStore
    id: str
    ops: dict[int, tuple[int, int]]  # tid -> (start, end) relative ns, read from the file


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> ManyRun:
    d = tmp_path_factory.mktemp("many")
    path = d / "many_threads.json"
    write_many_threads_trace(path, THREADS)
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    spans = {e["tid"]: (int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000)) for e in events if e["ph"] == "X"}
    origin = min(a for a, _ in spans.values())
    store = RunStore(d / "data")
    rec = ingest_paths(store, [path], "many threads")
    return ManyRun(store, rec.id, {t: (a - origin, b - origin) for t, (a, b) in spans.items()})


def _union(intervals: list[tuple[int, int]], start: int, end: int) -> int:
    total, reach = 0, start
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, end)
        if b > a:
            total, reach = total + b - a, b
    return total


def _thread(label: str) -> int:
    return int(label.rsplit(" ", 1)[-1])


def test_the_snapshot_holds_what_fits_and_summarises_every_other_track(many: ManyRun) -> None:
    snap = build_snapshot(Run.of(many.store, many.id))
    window, listing = snap["window"], snap["tracks"]
    budget = SNAPSHOT_HEIGHT_PX // ROW_PX
    assert len(window["tracks"]) == budget < THREADS
    assert window["tracks_summarised"] + len(window["tracks"]) == THREADS == listing["total"]
    assert [(s["lane"], s["tracks"]) for s in window["summaries"]] == [("framework", THREADS - budget)]
    # the listing is the tracks drawn, and they are the first threads in the timeline's order
    assert [t["track_id"] for t in listing["tracks"]] == [t["track_id"] for t in window["tracks"]]
    sent = {_thread(t["thread"]) for t in listing["tracks"]}
    assert sent == set(range(1, budget + 1))
    rest = [span for tid, span in many.ops.items() if tid not in sent]
    busy = window["summaries"][0]["busy_ns"]
    assert len(busy) == window["width_px"] and sum(busy) == _union(rest, window["start_ns"], window["end_ns"])
    # what the offline panel needs about each slice held: its args are embedded (one op per thread, no parent)
    held = [i for t in window["tracks"] for i in t["slices"]["id"]]
    assert len(held) == budget
    assert snap["details"]["args_complete"] and snap["details"]["parent"] == {}
    assert snap["chains"] == {}  # no flows in this trace: no slice has a chain longer than itself


def test_the_report_file_is_bounded_by_the_budget_not_the_run(many: ManyRun, tmp_path: Path) -> None:
    write_report(Run.of(many.store, many.id), tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    snap = json.loads(html.split('id="timeline-snapshot">', 1)[1].split("</script>", 1)[0])
    assert snap["window"]["tracks_summarised"] == THREADS - SNAPSHOT_HEIGHT_PX // ROW_PX
    assert len(snap["tracks"]["tracks"]) == SNAPSHOT_HEIGHT_PX // ROW_PX
    # the timeline's part (window and listing) is that of 909 tracks: ~0.4 MB, where every track in full was
    # ~2.1 MB at 5,000 threads and ~8.7 MB at 20,000 (search and op rows grow with the slices, to their own cap)
    timeline_part = len(json.dumps(snap["window"])) + len(json.dumps(snap["tracks"]))
    assert timeline_part < 600_000, timeline_part
