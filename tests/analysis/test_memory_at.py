"""compute_memory_at on a hand-made event list (an allocation, a second one, the first freed, one of another
device) and counter_where against the ingest's track names. Real captures: tests/e2e/test_memory_tracks.py."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.analysis.memory import MemoryEvents, Owners, device_name, pair_allocations
from explorer.analysis.memory_at import compute_memory_at, counter_where

EVENTS = MemoryEvents(
    ts_ns=np.asarray([10, 20, 25, 30], np.int64), thread=np.zeros(4, np.int64), addr=[1, 2, 9, 1],
    nbytes=np.asarray([100, 50, 7, -100], np.int64), allocated=np.asarray([100, 150, 7, 50], np.int64),
    reserved=np.zeros(4, np.int64), device=["CPU", "CPU", "CUDA 0", "CPU"])
OWNERS = Owners(op=["aten::empty", "aten::mm", "aten::add", "aten::view"],
                owner=["aten::clone", "aten::mm", "aten::add", "(no op)"], frame=["", "", "", ""],
                module=["nn.Module: A", "", "", ""])


@pytest.mark.parametrize(("at", "ts", "owner", "next_ts"), [
    (5, None, None, 10),  # before the first event: nothing in force yet
    (10, 10, "aten::clone", 20),
    (27, 20, "aten::mm", 30),  # the CUDA event at 25 is another device's
    (31, 30, "aten::clone", -1),  # a free: the freed allocation's owner, not the op running at the free
])
def test_the_event_in_force(at: int, ts: int | None, owner: str | None, next_ts: int) -> None:
    got = compute_memory_at(EVENTS, OWNERS, pair_allocations(EVENTS), "CPU", "allocated", at)
    assert got["next_ts_ns"] == next_ts
    assert (got["event"]["ts_ns"] if got["event"] else None) == ts
    assert (got["event"]["owner"] if got["event"] else None) == owner


def test_a_free_says_when_its_allocation_was_made() -> None:
    got = compute_memory_at(EVENTS, OWNERS, pair_allocations(EVENTS), "CPU", "allocated", 30)["event"]
    assert got is not None
    assert (got["bytes"], got["alloc_ts_ns"], got["free_ts_ns"], got["allocated"], got["module"]) == (
        -100, 10, 30, 50, "nn.Module: A")


@pytest.mark.parametrize(("device_type", "device_id", "where"), [(0, -1, "CPU"), (1, 0, "device 1:0"),
                                                                  (1, 3, "device 1:3"), (7, 2, "device 7:2")])
def test_counter_where_is_the_ingests_name(device_type: int, device_id: int, where: str) -> None:
    """The ingest names the series "memory allocated (<where>) [bytes]" with where = CPU or device <type>:<id>."""
    assert counter_where(device_name(device_type, device_id)) == where
