"""Device tracks built from in-memory device tables (explorer.analysis.device.tracks): one track per physical
core and timeline row, per DMA queue and per CC core, and a level-of-detail window over a big generated
profile whose payload stays bounded by the width while every instruction is still counted once."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pyarrow as pa

from explorer.analysis.device.tracks import build_device_index, build_device_timeline
from explorer.analysis.timeline.index import compute_window
from explorer.model.device import DEVICE_PROFILES
from explorer.model.tables import SLICES, TRACKS

BASE = 1_700_000_000_123_456_789  # epoch ns, beyond float64's exact integers
TRACK_ROWS = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")


def profiles(start: int, end: int) -> pa.Table:
    return pa.Table.from_pylist([{"profile_id": "p", "name": "p", "instance_id": "", "process_id": -1, "nc_id": 3,
                                  "model_id": -1, "session_id": -1, "start_ns": start, "end_ns": end,
                                  "system_slice_id": -1, "schema_version": "7.4.0", "source": "p@latest",
                                  "tables": ["Instruction"]}], schema=DEVICE_PROFILES)


def timeline(tables: dict[str, pa.Table], start: int, end: int):  # type: ignore[no-untyped-def]
    return build_device_timeline(profiles(start, end), {"p": tables}, TRACKS.empty_table(), SLICES.empty_table())


def test_one_track_per_core_and_row_queue_and_cc_core() -> None:
    inst = pa.table({"start_ts": [BASE + 30, BASE, BASE + 10, BASE + 5], "end_ts": [BASE + 40, BASE + 9, BASE + 20, BASE + 6],
                     "timeline_track": ["Vector", "Vector", "TensorMatrix", "Vector"], "pcore_idx": [1, 0, 0, 0],
                     "opcode": ["a", "b", "c", None], "id": [1, 2, 3, 4]})
    pkt = pa.table({"start_ts": [BASE, BASE + 1], "end_ts": [BASE + 3, BASE + 4], "pcore_idx": [0, 0],
                    "queue_type": ["input", "output"], "queue_name": ["qIn", "qOut"], "variable": [None, "y"]})
    cc = pa.table({"start_ts": [BASE + 2], "end_ts": [BASE + 8], "core_idx": [5], "description": ["all-reduce"]})
    dt = timeline({"Instruction": inst, "DmaPacket": pkt, "CcInstruction": cc}, BASE, BASE + 40)
    got = [(t["label"], t["group"], t["count"]) for t in dt.tracks]
    assert got == [("core 0 · TensorMatrix", "p · NC:3 · engines", 1), ("core 0 · Vector", "p · NC:3 · engines", 2),
                   ("core 1 · Vector", "p · NC:3 · engines", 1), ("qIn", "p · NC:3 · DMA input", 1),
                   ("qOut", "p · NC:3 · DMA output", 1), ("CC core 5", "p · NC:3 · CC cores", 1)]
    cols = dt.columns
    names = [dt.names[c] for c in cols["name"].tolist()]
    assert names == ["c", "b", "Instruction", "a", "qIn", "y", "all-reduce"]  # time order per track
    assert cols["ts"].tolist() == [BASE + 10, BASE, BASE + 5, BASE + 30, BASE, BASE + 1, BASE + 2]


def test_window_of_a_big_profile_is_bounded_and_counts_every_instruction() -> None:
    rng = np.random.default_rng(3)
    n = 300_000
    start = BASE + np.cumsum(rng.integers(5, 60, n))
    dur = rng.integers(20, 400, n)
    rows = rng.integers(0, len(TRACK_ROWS), n)
    inst = pa.table({"start_ts": pa.array(start), "end_ts": pa.array(start + dur),
                     "timeline_track": pa.array(np.asarray(TRACK_ROWS, dtype=object)[rows].tolist()),
                     "pcore_idx": pa.array(np.zeros(n, np.int64)), "opcode": pa.array(["op"] * n),
                     "id": pa.array(np.arange(n))})
    end = int((start + dur).max())
    dt = timeline({"Instruction": inst}, BASE, end)
    ix = build_device_index(dt, BASE)
    width = 1000
    window = compute_window(ix, 0, end - BASE, width)
    per_track = Counter(np.asarray(TRACK_ROWS, dtype=object)[rows].tolist())
    label = {t["track_id"]: t["label"] for t in dt.tracks}
    for t in window["tracks"]:
        shapes = len(t["slices"]["id"]) + len(t["merged"]["ts"])
        assert shapes <= 2 * width  # bounded by the width, not by the 50k instructions of the row
        assert len(t["slices"]["id"]) + sum(t["merged"]["count"]) == per_track[label[t["track_id"]]]
    assert {label[t["track_id"]] for t in window["tracks"]} == set(TRACK_ROWS)


def test_back_to_back_throttling_holds_its_level() -> None:
    throttle = pa.table({"timestamp": [BASE, BASE + 10], "duration": [10, 5], "k": [3, 1], "n": [4, 3],
                         "type": ["power", "power"], "pcore_idx": [0, 0]})
    dt = timeline({"Throttle": throttle}, BASE, BASE + 15)
    [(tid, ts, value)] = dt.counter_parts
    # 1 - k/n from each start; the first row's end (0) comes before the second's start at BASE + 10
    assert ts.tolist() == [BASE, BASE + 10, BASE + 10, BASE + 15]
    assert value.tolist() == [float(1 - Fraction(3, 4)), 0.0, float(1 - Fraction(1, 3)), 0.0]
    assert dt.tracks[0]["label"] == "throttling (power)"
