"""The warm-up rule on constructed Kineto traces: a first call far slower than the op's later calls, with the
device idle and the host not waiting on it, is warm-up (its excess recomputed from the file with plain json), and
the host-bound rule leaves the device gap inside it out; a first call that waits in a synchronize, runs while the
device is busy, or has no later calls of its shapes to compare with is not."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from explorer.store.runs import RunStore
from tests.analysis.advice.builder import Op, build
from tests.analysis.advice.test_engine_rules import US, advise, only

X = [[8, 3, 32, 32], [16, 3, 3, 3]]


def conv(dur: int, kernel: int = 50, shapes: list[list[int]] | None = None, inner_sync: int = 0) -> Op:
    return Op("aten::conv2d", dur, shapes or X, kernel, inner_sync=inner_sync)


def first_call_excess_us(path: Path, name: str) -> int:
    """The op's first call's duration minus the median of its later calls, in µs, read with plain json."""
    calls = sorted((e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == name),
                   key=lambda e: e["ts"])
    return int(calls[0]["dur"] - statistics.median(e["dur"] for e in calls[1:]))


def test_a_slow_first_call_with_the_device_idle_is_warm_up(store: RunStore, tmp_path: Path) -> None:
    path = build([conv(5000)] + [conv(100) for _ in range(5)], tmp_path / "cold.json")
    advice = advise(store, path)
    f = only(advice, "warm-up")
    assert f["acts_on_ns"] == first_call_excess_us(path, "aten::conv2d") * US == 4900 * US
    assert f["saving_ns"] is None and f["confidence"] == "high"
    facts = {x["label"]: x["value"] for x in f["facts"]}
    assert facts["first calls far slower than their op's later calls"] == 1
    assert "schedule(wait=1, warmup=2, active=3)" in f["fix"]
    # the ~4.9 ms device gap inside the first call is the host busy in it: warm-up, not a host-bound step
    assert "host-bound" not in {x["rule"] for x in advice["findings"]}


def test_the_same_gap_in_every_call_is_host_bound(store: RunStore, tmp_path: Path) -> None:
    advice = advise(store, build([conv(5000) for _ in range(6)], tmp_path / "steady.json"))
    rules = {x["rule"] for x in advice["findings"]}
    assert "host-bound" in rules and "warm-up" not in rules


def test_a_slow_first_call_that_waits_on_the_device_is_not_warm_up(store: RunStore, tmp_path: Path) -> None:
    path = build([conv(5000, inner_sync=4800)] + [conv(100) for _ in range(5)], tmp_path / "sync.json")
    assert "warm-up" not in {x["rule"] for x in advise(store, path)["findings"]}


def test_a_slow_first_call_with_the_device_busy_is_not_warm_up(store: RunStore, tmp_path: Path) -> None:
    path = build([conv(5000, kernel=4000)] + [conv(100) for _ in range(5)], tmp_path / "busy.json")
    assert "warm-up" not in {x["rule"] for x in advise(store, path)["findings"]}


def test_calls_are_compared_within_their_shapes(store: RunStore, tmp_path: Path) -> None:
    """A big first call of other shapes is other work, not warm-up: the later calls share no shapes with it."""
    big = [[64, 3, 224, 224], [16, 3, 3, 3]]
    path = build([conv(5000, shapes=big)] + [conv(100) for _ in range(5)], tmp_path / "shapes.json")
    assert "warm-up" not in {x["rule"] for x in advise(store, path)["findings"]}


def test_a_first_call_under_ten_times_its_later_calls_is_not_warm_up(store: RunStore, tmp_path: Path) -> None:
    path = build([conv(5000)] + [conv(600) for _ in range(5)], tmp_path / "slowish.json")
    assert "warm-up" not in {x["rule"] for x in advise(store, path)["findings"]}


def test_a_warm_up_call_covers_only_its_own_ranks_gaps() -> None:
    import numpy as np

    from explorer.analysis.advice.warmup import NO_RANK, Warmup

    w = Warmup(np.array([7]), np.array([4_900_000]), [(1_000, 6_000, 0)])
    assert w.covers(2_000, 5_000, 0) and w.covers(2_000, 5_000, None) and w.covers(2_000, 5_000, NO_RANK)
    assert not w.covers(2_000, 5_000, 1)  # rank 1's gap at the same time is rank 1's own
    assert not w.covers(5_000, 9_000, 0)  # less than half of it inside
