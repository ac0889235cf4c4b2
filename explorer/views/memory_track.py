"""The timeline's memory counter tracks, hovered (`GET /api/runs/{id}/memory/at?track=&at_ns=`): the track's device
from its label, and the [memory] event in force at that time with its owner op (explorer.analysis.memory_at). The
run's events, owners and pairing are read once and kept in the store's memo."""

from __future__ import annotations

import re

import numpy as np
import pyarrow.compute as pc

from explorer.analysis.memory import MemoryEvents, Owners, compute_owners, pair_allocations
from explorer.analysis.memory_at import MemoryAt, compute_memory_at, counter_where
from explorer.errors import BadRequest
from explorer.store.runs import RunStore
from explorer.views.memory_data import read_thread_events, thread_ops

__all__ = ["MemoryAt", "compute_run_memory_at"]

# the ingest's names of a [memory] instant's counter tracks (explorer/ingest/chrome/feed.py, _memory_series)
MEMORY_TRACK = re.compile(r"^memory (allocated|reserved) \((.+)\) \[bytes\]$")


def compute_run_memory_at(store: RunStore, run_id: str, track_id: int, at_ns: int) -> MemoryAt:
    """The hover of memory counter track `track_id` at `at_ns` (ns from the run's start)."""
    tracks = store.table(run_id, "tracks")
    found = tracks.filter(pc.equal(tracks.column("track_id"), track_id)).column("label").to_pylist()
    match = MEMORY_TRACK.match(found[0]) if found else None
    if match is None:
        raise BadRequest(f"track {track_id} is not a memory counter track of run {run_id}")
    owned = _owned_events(store, run_id)
    device = next((d for d in sorted(set(owned[0].device)) if counter_where(d) == match.group(2)), None) \
        if owned is not None else None
    if owned is None or device is None:
        raise BadRequest(f"run {run_id} has no [memory] events with addresses for {match.group(2)}")
    events, owners, partner = owned
    return compute_memory_at(events, owners, partner, device, match.group(1), at_ns)


def _owned_events(store: RunStore, run_id: str) -> tuple[MemoryEvents, Owners, np.ndarray] | None:
    def build() -> tuple[MemoryEvents, Owners, np.ndarray] | None:
        read = read_thread_events(store, run_id)
        if read is None:
            return None
        thread_of_track, keys, events = read
        ops, _ = thread_ops(store.table(run_id, "slices"), thread_of_track, keys, store.get(run_id).summary.start_ns)
        return events, compute_owners(events, ops), pair_allocations(events)

    return store.derived.get(run_id, "memory_owned", build)
