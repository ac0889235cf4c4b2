"""Allocator snapshots: a fixture written from the format torch/cuda/_memory_viz.py reads (segments, blocks,
device_traces with frames), with a known history, against numbers worked out by hand; the pickle and JSON forms;
a hostile pickle refused with nothing run."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from explorer.analysis.memory import BEFORE
from explorer.errors import BadTrace, UnsafePickle
from explorer.ingest.alloc_snapshot import load_snapshot
from explorer.ingest.detect import Format, detect_format
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from explorer.views.memory import compute_run_memory

MiB = 2**20
S0, S1 = 0x7F0000000000, 0x7F0010000000  # two segments: S0 (20 MiB) was there before the trace began


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


CPP = [frame("??", 0, "unwind::unwind"), frame("c10/cuda/CUDACachingAllocator.cpp", 1200, "malloc")]
FORWARD = [*CPP, frame("/src/model.py", 10, "forward"), frame("/src/train.py", 3, "main")]
LOSS = [*CPP, frame("/src/model.py", 20, "loss"), frame("/src/train.py", 3, "main")]
STEP = [*CPP, frame("/src/train.py", 5, "step")]


def entry(action: str, addr: int, size: int, t: int, frames: list[dict[str, Any]] | None = None,
          **extra: Any) -> dict[str, Any]:
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": frames or [], **extra}


def snapshot() -> dict[str, Any]:
    """Before the trace: S0 (20 MiB) holding A (4 MiB). The trace: S1 (8 MiB) is reserved, B (6 MiB, forward), C
    (2 MiB, loss), D (10 MiB, step) allocated — the peak, 22 MiB — D freed, an OOM asking 30 MiB, E (1 MiB)."""
    trace = [
        entry("segment_alloc", S1, 8 * MiB, 100),
        entry("alloc", S1, 6 * MiB, 110, FORWARD),
        entry("alloc", S0 + 4 * MiB, 2 * MiB, 120, LOSS),
        entry("alloc", S0 + 6 * MiB, 10 * MiB, 130, STEP),
        entry("free_requested", S0 + 6 * MiB, 10 * MiB, 140, STEP),
        entry("free_completed", S0 + 6 * MiB, 10 * MiB, 141, STEP),
        {**entry("oom", 0, 30 * MiB, 150, STEP), "device_free": MiB},
        entry("alloc", S0 + 6 * MiB, MiB, 160, LOSS),
    ]
    s0 = [{"address": S0, "size": 4 * MiB, "requested_size": 4 * MiB - 100, "state": "active_allocated",
           "frames": FORWARD},
          {"address": S0 + 4 * MiB, "size": 2 * MiB, "requested_size": 2 * MiB, "state": "active_allocated",
           "frames": LOSS},
          {"address": S0 + 6 * MiB, "size": MiB, "requested_size": MiB, "state": "active_allocated", "frames": LOSS},
          {"address": S0 + 7 * MiB, "size": 13 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]
    s1 = [{"address": S1, "size": 6 * MiB, "requested_size": 6 * MiB - 512, "state": "active_allocated",
           "frames": FORWARD},
          {"address": S1 + 6 * MiB, "size": 2 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]
    segments = [{"device": 0, "address": addr, "total_size": size, "stream": 0, "segment_type": "large",
                 "segment_pool_id": (0, 0), "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                 "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"), "blocks": blocks}
                for addr, size, blocks in ((S0, 20 * MiB, s0), (S1, 8 * MiB, s1))]
    return {"segments": segments, "device_traces": [trace]}


@pytest.mark.parametrize("form", ["pickle2", "pickle4", "pickle5", "json"])
def test_snapshot_report_equals_the_history_worked_by_hand(store: RunStore, tmp_path: Path, form: str) -> None:
    snap = snapshot()
    data = json.dumps(snap).encode() if form == "json" else pickle.dumps(snap, protocol=int(form[-1]))
    assert detect_format(data) is Format.ALLOC_SNAPSHOT
    path = tmp_path / "snapshot.bin"
    path.write_bytes(data)
    rec = ingest_paths(store, [path])
    [dev] = compute_run_memory(store, rec.id)["snapshot"]
    assert (dev["device"], dev["actions"], dev["allocs"], dev["frees"]) == (0, 8, 4, 1)
    # active: 4 before the trace, +6 +2 +10 = 22 MiB (the peak, after action 3), -10, +1 = 13 at the end
    assert dev["active"] == [4 * MiB, 10 * MiB, 12 * MiB, 22 * MiB, 22 * MiB, 12 * MiB, 12 * MiB, 13 * MiB]
    assert dev["reserved"] == [28 * MiB] * 8
    assert (dev["peak_bytes"], dev["peak_seq"], dev["peak_x"], dev["peak_reserved"]) == (22 * MiB, 3, 130, 28 * MiB)
    assert {r["owner"]: r["bytes"] for r in dev["peak_by_frame"]} == {
        "train.py:5:step": 10 * MiB, "model.py:10:forward": 6 * MiB, "model.py:20:loss": 2 * MiB, BEFORE: 4 * MiB}
    assert sum(r["bytes"] for r in dev["peak_by_frame"]) == dev["peak_bytes"]
    # reserved - active: 28-4 = 24 MiB right after S1 is reserved (before that: 20-4 = 16)
    assert dev["max_fragmentation"] == 24 * MiB
    assert dev["end"] == {"segments": 2, "reserved": 28 * MiB, "active": 13 * MiB, "requested": 13 * MiB - 612,
                          "free_external": 15 * MiB, "free_internal": 612, "largest_free": 13 * MiB}
    assert dev["ooms"] == [{"seq": 6, "time_us": 150, "size": 30 * MiB, "device_free": MiB,
                            "frame": "train.py:5:step"}]
    assert dev["x_kind"] == "time_us" and dev["x"] == [100, 110, 120, 130, 140, 141, 150, 160]


class Payload:
    """What a hostile snapshot would carry: unpickling it calls open(path, "w"), creating the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


def test_a_hostile_pickle_is_refused_and_nothing_runs(store: RunStore, tmp_path: Path) -> None:
    canary = tmp_path / "created-by-the-pickle"
    data = pickle.dumps({"segments": [], "device_traces": [[Payload(canary)]]}, protocol=4)
    pickle.loads(data)["device_traces"][0][0].close()  # (the payload works: plain pickle.loads creates the file)
    assert canary.exists()
    canary.unlink()
    assert detect_format(data) is Format.ALLOC_SNAPSHOT
    with pytest.raises(UnsafePickle, match=r"io\.open"):
        load_snapshot(data, "evil.pickle")
    path = tmp_path / "evil.pickle"
    path.write_bytes(data)
    with pytest.raises(UnsafePickle) as err:
        ingest_paths(store, [path])
    assert err.value.code == "unsafe_pickle" and "nothing of it was run" in err.value.message
    assert not canary.exists()


@pytest.mark.parametrize(("data", "why"), [
    (pickle.dumps({"segments": "x"}, protocol=4), "no 'segments' list"),
    (pickle.dumps({"segments": []}, protocol=4)[:-6], "not a readable allocator snapshot pickle"),
    (b'{"segments": [1, 2', "invalid JSON"),
])
def test_damaged_snapshots_are_clear_errors(data: bytes, why: str) -> None:
    with pytest.raises(BadTrace, match=why):
        load_snapshot(data, "snap")


def test_other_pickles_are_still_never_loaded() -> None:
    assert detect_format(pickle.dumps({"weights": [1.0]}, protocol=4)) is Format.BINARY
