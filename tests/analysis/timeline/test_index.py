"""Level-of-detail windows: exact on raw slices, and the level pyramid keeps the same totals."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from explorer.analysis.timeline import index as lod
from explorer.analysis.timeline.index import build_timeline_index, compute_window
from explorer.model.tables import COUNTERS, FLOWS, TRACKS


def _run(n: int, seed: int = 1) -> lod.TimelineIndex:
    """One track: a root slice over everything (depth 0) and n short slices under it (depth 1)."""
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.integers(50, 500, n)).astype(np.int64)
    durs = rng.integers(1, 40, n).astype(np.int64)
    durs[::97] = 5_000  # some long ones
    ts = np.concatenate(([0], starts))
    dur = np.concatenate(([int(starts[-1] + 10_000)], durs))
    depth = np.concatenate(([0], np.ones(n, np.int32)))
    names = ["root"] + [f"op{i % 7}" for i in range(n)]
    slices = pa.table({"slice_id": np.arange(n + 1), "track_id": np.zeros(n + 1, np.int32), "ts_ns": ts,
                       "dur_ns": dur, "depth": depth.astype(np.int32), "name": names})
    tracks = pa.Table.from_pylist([{"track_id": 0, "lane": "framework", "kind": "slice", "instance": "",
                                    "process": "p", "thread": "t", "label": "t", "device": "", "sort_key": 0,
                                    "max_depth": 1, "count": n + 1},
                                   {"track_id": 1, "lane": "counter", "kind": "counter", "instance": "",
                                    "process": "p", "thread": "", "label": "c", "device": "", "sort_key": 1,
                                    "max_depth": 0, "count": 5000}], schema=TRACKS)
    counters = pa.table({"track_id": np.ones(5000, np.int32), "ts_ns": np.arange(5000, dtype=np.int64) * 100,
                         "value": np.sin(np.arange(5000) / 10.0)}, schema=COUNTERS)
    flows = pa.table({"flow_id": [0], "from_slice": [1], "to_slice": [2], "kind": ["generic"]}, schema=FLOWS)
    return build_timeline_index(slices, tracks, counters, flows, origin_ns=0)


def _totals(window: dict) -> tuple[int, int]:  # type: ignore[type-arg]
    t = window["tracks"][0]
    count = len(t["slices"]["id"]) + sum(t["merged"]["count"])
    busy = sum(t["slices"]["dur"]) + sum(t["merged"]["busy_ns"])
    return count, busy


def test_raw_window_keeps_wide_and_merges_narrow() -> None:
    ix = _run(200)
    end = int(ix.end_max.max())
    w = compute_window(ix, 0, end, 100, [0])
    t = w["tracks"][0]
    assert w["names"][t["slices"]["name"][0]] == "root"
    assert all(d >= w["ns_per_px"] for d in t["slices"]["dur"])
    assert _totals(w) == (201, int(ix.dur.sum()))
    assert len(t["merged"]["ts"]) <= 100 * 2


def test_level_path_matches_raw_totals(monkeypatch: pytest.MonkeyPatch) -> None:
    ix = _run(50_000)
    assert ix.levels, "a 50k-slice track should get pyramid levels"
    end = int(ix.end_max.max())
    for start, stop in ((0, end), (end // 3, end // 3 + end // 10)):
        fast = compute_window(ix, start, stop, 2000, [0])
        monkeypatch.setattr(lod, "RAW_LIMIT", 10**9)
        exact = compute_window(ix, start, stop, 2000, [0])
        monkeypatch.undo()
        assert fast["tracks"][0]["slices"] == exact["tracks"][0]["slices"]
        if start == 0:
            assert _totals(fast) == _totals(exact)
        assert len(fast["tracks"][0]["merged"]["ts"]) <= 2 * 2000


def test_payload_is_bounded_by_width_not_size() -> None:
    small, big = _run(5_000), _run(100_000)
    sizes = []
    for ix in (small, big):
        w = compute_window(ix, 0, int(ix.end_max.max()), 500, [0])
        t = w["tracks"][0]
        sizes.append(len(t["slices"]["id"]) + len(t["merged"]["ts"]))
    assert max(sizes) <= 2 * 500 + 600  # at most a run per pixel and depth, plus the wide slices


def test_long_slice_before_window_is_found() -> None:
    ix = _run(10_000)
    end = int(ix.end_max.max())
    w = compute_window(ix, end - 100, end, 10, [0])
    assert "root" in w["names"]


def test_counters_downsample_to_min_and_max_per_pixel() -> None:
    ix = _run(10)
    w = compute_window(ix, 0, 500_000, 50, [1])
    c = w["tracks"][0]["counter"]
    assert len(c["ts"]) <= 100 and c["ts"] == sorted(c["ts"])
    assert max(c["value"]) == pytest.approx(1.0, abs=1e-3) and min(c["value"]) == pytest.approx(-1.0, abs=1e-3)


def test_instant_tracks_come_one_per_pixel_with_counts() -> None:
    """Also a run with no slices at all (only instants), which must not break the index."""
    tracks = pa.table({"track_id": pa.array([0], pa.int32()), "kind": ["instant"], "lane": ["other"]})
    instants = pa.table({"track_id": pa.array([0, 0, 0, 0], pa.int32()), "ts_ns": pa.array([10, 11, 500, 990], pa.int64()),
                         "name": ["a", "b", "c", "d"], "cat": ["x"] * 4, "args": ["{}"] * 4})
    empty_slices = pa.table({"slice_id": pa.array([], pa.int64()), "track_id": pa.array([], pa.int32()),
                             "ts_ns": pa.array([], pa.int64()), "dur_ns": pa.array([], pa.int64()),
                             "depth": pa.array([], pa.int32()), "name": pa.array([], pa.string())})
    counters = pa.table({"track_id": pa.array([], pa.int32()), "ts_ns": pa.array([], pa.int64()),
                         "value": pa.array([], pa.float64())})
    flows = pa.table({"flow_id": pa.array([], pa.int64()), "from_slice": pa.array([], pa.int64()),
                      "to_slice": pa.array([], pa.int64()), "kind": pa.array([], pa.string())})
    ix = build_timeline_index(empty_slices, tracks, counters, flows, origin_ns=0, instants=instants)
    out = compute_window(ix, 0, 1000, 10)
    assert out["tracks"] == [{"track_id": 0, "kind": "instant",
                              "instants": {"ts": [10, 500, 990], "name": ["a", "c", "d"], "count": [2, 1, 1]}}]
    assert compute_window(ix, 400, 600, 10)["tracks"][0]["instants"] == {"ts": [500], "name": ["c"], "count": [1]}
