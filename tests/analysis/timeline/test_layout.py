"""Windows bounded in total: the tracks that fit the height in full, the rest in per-lane busy summaries
that account for every track, with busy time equal to a brute-force union over the integer ns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from explorer.analysis.timeline.index import WindowPart, build_timeline_index, compute_bounded_window
from explorer.analysis.timeline.layout import (
    TRACK_ROW_PX,
    busy_per_column,
    pixel_bounds,
    scope_of,
    track_budget,
)
from explorer.analysis.timeline.levels import segmented_running_max
from explorer.model.tables import COUNTERS, FLOWS, TRACKS

LANES = ("framework", "runtime", "hardware")


def _brute_busy(intervals: list[tuple[int, int]], start: int, end: int, width: int) -> list[int]:
    """Per column, how many integer ns in it some interval covers: one ns at a time."""
    covered = set()
    for a, b in intervals:
        covered.update(range(max(a, start), min(b, end)))
    edges = [start + (p * (end - start)) // width for p in range(width + 1)]
    return [sum(1 for t in range(edges[p], edges[p + 1]) if t in covered) for p in range(width)]


def _many_tracks(n: int, seed: int = 3) -> tuple[list[dict[str, int | str]], pa.Table, pa.Table]:
    """n one-slice-or-two tracks spread over three lanes, each with a nested child (depth 1)."""
    rng = np.random.default_rng(seed)
    rows, slices = [], []
    for t in range(n):
        rows.append({"track_id": t, "lane": LANES[t % 3], "kind": "slice", "instance": "", "process": "p",
                     "thread": f"t{t}", "label": f"t{t}", "device": "", "sort_key": n - t, "max_depth": 1,
                     "count": 2})
        a = int(rng.integers(0, 9_000))
        d = int(rng.integers(1, 800))
        slices += [(t, a, d, 0), (t, a, max(1, d // 2), 1)]
    cols = list(zip(*slices, strict=True))
    table = pa.table({"slice_id": np.arange(len(slices)), "track_id": np.asarray(cols[0], np.int32),
                      "ts_ns": np.asarray(cols[1], np.int64), "dur_ns": np.asarray(cols[2], np.int64),
                      "depth": np.asarray(cols[3], np.int32), "name": [f"op{i % 5}" for i in range(len(slices))]})
    return rows, table, pa.Table.from_pylist(rows, schema=TRACKS)


def _index(n: int):  # type: ignore[no-untyped-def]
    rows, slices, tracks = _many_tracks(n)
    empty_c = pa.table({"track_id": np.zeros(0, np.int32), "ts_ns": np.zeros(0, np.int64),
                        "value": np.zeros(0)}, schema=COUNTERS)
    empty_f = pa.table({"flow_id": [], "from_slice": [], "to_slice": [], "kind": []}, schema=FLOWS)
    return rows, slices, build_timeline_index(slices, tracks, empty_c, empty_f, origin_ns=0)


@pytest.mark.parametrize(("start", "end", "width"), [(0, 3000, 37), (-50, 1000, 1000), (100, 101, 1), (0, 997, 7)])
def test_busy_per_column_is_the_union_of_intervals(start: int, end: int, width: int) -> None:
    rng = np.random.default_rng(width)
    a = np.sort(rng.integers(-100, 3100, 60)).astype(np.int64)
    b = a + rng.integers(0, 200, 60)
    got = busy_per_column(a, b, pixel_bounds(start, end, width)).tolist()
    assert got == _brute_busy(list(zip(a.tolist(), b.tolist(), strict=True)), start, end, width)


def test_pixel_bounds_do_not_overflow_on_long_spans() -> None:
    start, end, width = -(10**18), 4 * 10**18, 20_000
    edges = pixel_bounds(start, end, width).tolist()
    assert edges == [start + (p * (end - start)) // width for p in range(width + 1)]


def test_segmented_running_max_restarts_per_group() -> None:
    rng = np.random.default_rng(5)
    group = np.sort(rng.integers(0, 40, 3000))
    values = rng.integers(-1000, 1000, 3000).astype(np.int64)
    expected = values.copy()
    for g in np.unique(group).tolist():
        sel = np.flatnonzero(group == g)
        expected[sel] = np.maximum.accumulate(values[sel])
    assert segmented_running_max(values, group).tolist() == expected.tolist()


def test_the_first_tracks_that_fit_are_sent_and_every_other_is_summarised() -> None:
    rows, slices, ix = _index(600)
    height = 10 * TRACK_ROW_PX + 5
    w = compute_bounded_window([WindowPart(ix, scope_of(ix.order, set()))], 0, 10_000, 50, height)
    # display order: lane, then sort_key (descending ids here), then id
    expected_order = [r["track_id"] for r in sorted(rows, key=lambda r: (LANES.index(str(r["lane"])), r["sort_key"]))]
    sent = [t["track_id"] for t in w["tracks"]]
    assert sent == expected_order[:track_budget(height)] and len(sent) == 10
    assert w["tracks_summarised"] + len(sent) == 600
    assert {s["lane"]: s["tracks"] for s in w["summaries"]} == {
        lane: sum(1 for r in rows if r["lane"] == lane and r["track_id"] not in sent) for lane in LANES}
    tracks, ts, dur, depth = (slices.column(c).to_pylist() for c in ("track_id", "ts_ns", "dur_ns", "depth"))
    for summary in w["summaries"]:
        mine = [(a, a + d) for t, a, d, k in zip(tracks, ts, dur, depth, strict=True)
                if k == 0 and t not in sent and rows[t]["lane"] == summary["lane"]]
        assert summary["busy_ns"] == _brute_busy(mine, 0, 10_000, 50)


def test_asked_tracks_come_first_capped_by_the_height_and_the_lanes_filter_narrows_the_scope() -> None:
    rows, _, ix = _index(300)
    asked = [299, 5, 5, 17, 10_000, 42]
    w = compute_bounded_window([WindowPart(ix, scope_of(ix.order, set()), asked)], 0, 10_000, 20, 3 * TRACK_ROW_PX)
    assert [t["track_id"] for t in w["tracks"]] == [299, 5, 17]  # once each, an unknown id dropped, 3 fit
    assert w["tracks_summarised"] == 297
    only_hw = scope_of(ix.order, {"hardware"})
    w = compute_bounded_window([WindowPart(ix, only_hw, [5, 16])], 0, 10_000, 20, 1000)
    assert [t["track_id"] for t in w["tracks"]] == [5]  # 16 is a runtime track: out of scope
    assert [s["lane"] for s in w["summaries"]] == ["hardware"]
    assert w["tracks_summarised"] == sum(1 for r in rows if r["lane"] == "hardware") - 1
