"""The op table's memory columns for a stored run (ops page and `/api/runs/{id}/ops`): its [memory] events and op
tree read from the store and handed to explorer.analysis.op_memory, for one device (the highest peak unless one is
chosen), per name, shape or nn.Module row, for some ranks' tracks and a time range; and the rows joined with them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from explorer.analysis.memory import MemoryEvents, pair_allocations
from explorer.analysis.op_memory import OP_MEMORY_COLUMNS, compute_op_memory
from explorer.analysis.op_stats import compute_op_events, module_paths
from explorer.analysis.rank_slices import rank_key, rank_track_ids
from explorer.errors import BadRequest
from explorer.model.ranks import NO_RANK, track_ranks
from explorer.model.shapes import OpMemorySummary, OpRow
from explorer.store.queries import OP_TIE_BREAK, load_op_inputs, op_sort_descending
from explorer.store.runs import RunStore
from explorer.views.memory_data import read_memory_events


def run_op_memory(store: RunStore, run_id: str, by_shape: bool, by_module: bool = False,
                  ranks: tuple[int, ...] | None = None, window: tuple[int, int] | None = None,
                  device: str = "") -> tuple[OpMemorySummary, pa.Table] | None:
    """The run's memory columns per op row (module, name, input_shapes), kept in the store's memo; None without
    events (of those ranks). `window`: [start, end) relative ns, the ops starting there and their allocations
    there; `device`: the device whose events count ("" the highest peak; another name is a 400)."""
    def build() -> tuple[OpMemorySummary, pa.Table] | None:
        read = read_memory_events(store, run_id)
        if read is None:
            _no_events(device)
            return None
        thread_of_track, events = read
        tracks = store.table(run_id, "tracks")
        if ranks is not None:  # the ranks' host threads' events (memory events are instants of a thread)
            threads = {thread_of_track.get(int(t), -1) for t in rank_track_ids(tracks, ranks)}
            events = _take(events, np.isin(events.thread, np.asarray(sorted(threads - {-1}), dtype=np.int64)))
            if not len(events.ts_ns):
                _no_events(device, ranks)
                return None
        events = _per_rank_devices(events, thread_of_track, tracks)
        partner = pair_allocations(events)
        peaks: dict[str, tuple[int, int]] = {}
        for i, (d, total) in enumerate(zip(events.device, events.allocated.tolist(), strict=True)):
            if d not in peaks or total > peaks[d][0]:
                peaks[d] = (total, i)
        devices = sorted(peaks, key=lambda d: (d != "CPU", d))
        if device and device not in peaks:
            raise BadRequest(f"memory_device {device!r}: the run's [memory] devices are {', '.join(devices)}")
        chosen = device or max(peaks, key=lambda d: (peaks[d][0], d == "CPU"))
        lo, hi = window if window is not None else (None, None)
        inside = np.asarray([d == chosen for d in events.device], dtype=bool)
        if lo is not None:
            inside &= (events.ts_ns >= lo) & (events.ts_ns < hi)
        mine = np.flatnonzero(inside)
        at = int(mine[int(np.argmax(events.allocated[mine]))]) if len(mine) else -1  # the first at the maximum
        nbytes = events.nbytes[mine]
        live = (nbytes > 0) & (mine <= at) & ((partner[mine] < 0) | (partner[mine] > at))
        slices, flows = load_op_inputs(store, run_id, ranks)
        ev = compute_op_events(slices, flows)
        origin = store.require_ready(run_id).summary.start_ns
        of_track = np.full(max(thread_of_track, default=0) + 1, -1, dtype=np.int64)
        for track, thread in thread_of_track.items():
            of_track[track] = thread
        track = slices.column("track_id").to_numpy()[ev.ops]
        start = slices.column("ts_ns").to_numpy()[ev.ops] - origin
        end = start + slices.column("dur_ns").to_numpy()[ev.ops]
        keep = None if lo is None else (start >= lo) & (start < hi)
        table = compute_op_memory(ev, start, end, of_track[track], events.ts_ns[mine], events.thread[mine], nbytes,
                                  live, by_shape, keep, module_paths(ev, slices) if by_module else None)
        allocated = int(nbytes[nbytes > 0].sum())
        peak_bytes = int(events.allocated[at]) if at >= 0 else 0
        summary = OpMemorySummary(
            device=chosen, devices=devices, allocated_bytes=allocated,
            allocations=int((nbytes > 0).sum()), peak_bytes=peak_bytes,
            outside_allocated_bytes=allocated - int(_column_sum(table, "self_allocated_bytes")),
            outside_peak_bytes=peak_bytes - int(_column_sum(table, "self_peak_bytes")))
        return summary, table

    key = f"op_memory:{int(by_shape)}:{int(by_module)}:{window}:{device}" + ("" if ranks is None else rank_key(ranks))
    return store.derived.get(run_id, key, build)


def _no_events(device: str, ranks: tuple[int, ...] | None = None) -> None:
    if device:
        raise BadRequest(f"memory_device {device!r}: the run has no [memory] events"
                         + ("" if ranks is None else " on those ranks"))


def _per_rank_devices(events: MemoryEvents, thread_of_track: dict[int, int], tracks: pa.Table) -> MemoryEvents:
    """Events of several ranks: each rank's allocators apart (`CUDA 0 (rank 1)`), as each process has its own
    (addresses and totals are per process); the events of one rank keep their device names."""
    rank_of_thread = {thread_of_track.get(t, -1): r for t, r in zip(tracks.column("track_id").to_pylist(),
                                                                    track_ranks(tracks).tolist(), strict=True)}
    of_event = [rank_of_thread.get(th, NO_RANK) for th in events.thread.tolist()]
    if len(set(of_event) - {NO_RANK}) < 2:
        return events
    device = [d if r == NO_RANK else f"{d} (rank {r})" for d, r in zip(events.device, of_event, strict=True)]
    return MemoryEvents(events.ts_ns, events.thread, events.addr, events.nbytes, events.allocated, events.reserved,
                        device)


def _take(events: MemoryEvents, keep: np.ndarray) -> MemoryEvents:
    at = np.flatnonzero(keep)
    return MemoryEvents(events.ts_ns[at], events.thread[at], [events.addr[i] for i in at.tolist()],
                        events.nbytes[at], events.allocated[at], events.reserved[at],
                        [events.device[i] for i in at.tolist()])


def _column_sum(table: pa.Table, column: str) -> int:
    return sum(table.column(column).to_pylist())


def add_op_memory(rows: Sequence[OpRow], table: pa.Table) -> None:
    """Each row gets its memory columns (0 for a row no op of which saw an event)."""
    cols = {c: table.column(c).to_pylist() for c in OP_MEMORY_COLUMNS}
    at = {key: i for i, key in enumerate(zip(*(table.column(c).to_pylist() for c in ("module", "name",
                                                                                     "input_shapes")), strict=True))}
    for row in rows:
        i = at.get((row.get("module", ""), row["name"], row["input_shapes"]))
        for c in OP_MEMORY_COLUMNS:
            row[c] = 0 if i is None else cols[c][i]  # type: ignore[literal-required]


def is_memory_sort(sort: str) -> bool:
    return sort.lstrip("-+") in OP_MEMORY_COLUMNS


def sort_memory_rows(rows: list[OpRow], sort: str, limit: int | None) -> list[OpRow]:
    """Rows (with memory columns) in the order of a memory column, ties as the op table breaks them."""
    key = sort.lstrip("-+")
    if key not in OP_MEMORY_COLUMNS:
        raise BadRequest(f"cannot sort by {sort!r}")
    ties = [c for c in OP_TIE_BREAK if c != key]
    out = sorted(rows, key=lambda r: tuple(str(r.get(c, "")) for c in ties))
    out.sort(key=lambda r: r[key], reverse=op_sort_descending(sort))  # type: ignore[literal-required]
    return out if limit is None else out[:max(0, limit)]
