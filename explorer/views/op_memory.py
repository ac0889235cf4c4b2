"""The op table's memory columns for a stored run (ops page and `/api/runs/{id}/ops`): its [memory] events and op
tree read from the store and handed to explorer.analysis.op_memory, for the device with the highest peak; and the
rows joined with them. Only the whole run's per-name and per-shape tables get them (not module, rank or range)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from explorer.analysis.memory import live_at_peak, pair_allocations
from explorer.analysis.op_memory import OP_MEMORY_COLUMNS, compute_op_memory
from explorer.analysis.op_stats import compute_op_events
from explorer.errors import BadRequest
from explorer.model.shapes import OpMemorySummary, OpRow
from explorer.store.queries import OP_TIE_BREAK, load_op_inputs, op_sort_descending
from explorer.store.runs import RunStore
from explorer.views.memory_data import read_memory_events


def run_op_memory(store: RunStore, run_id: str, by_shape: bool) -> tuple[OpMemorySummary, pa.Table] | None:
    """The run's memory columns per op row (name, input_shapes), kept in the store's memo; None without events."""
    def build() -> tuple[OpMemorySummary, pa.Table] | None:
        read = read_memory_events(store, run_id)
        if read is None:
            return None
        thread_of_track, events = read
        partner = pair_allocations(events)
        peaks: dict[str, tuple[int, int]] = {}
        for i, (d, total) in enumerate(zip(events.device, events.allocated.tolist(), strict=True)):
            if d not in peaks or total > peaks[d][0]:
                peaks[d] = (total, i)
        device = max(peaks, key=lambda d: (peaks[d][0], d == "CPU"))
        mine = np.asarray([d == device for d in events.device], dtype=bool)
        live = live_at_peak(events, partner, device)[mine]
        slices, flows = load_op_inputs(store, run_id)
        ev = compute_op_events(slices, flows)
        origin = store.require_ready(run_id).summary.start_ns
        of_track = np.full(max(thread_of_track, default=0) + 1, -1, dtype=np.int64)
        for track, thread in thread_of_track.items():
            of_track[track] = thread
        track = slices.column("track_id").to_numpy()[ev.ops]
        start = slices.column("ts_ns").to_numpy()[ev.ops] - origin
        end = start + slices.column("dur_ns").to_numpy()[ev.ops]
        nbytes = events.nbytes[mine]
        table = compute_op_memory(ev, start, end, of_track[track], events.ts_ns[mine], events.thread[mine], nbytes,
                                  live, by_shape)
        allocated = int(nbytes[nbytes > 0].sum())
        peak_bytes = peaks[device][0]
        summary = OpMemorySummary(
            device=device, devices=sorted(peaks, key=lambda d: (d != "CPU", d)), allocated_bytes=allocated,
            allocations=int((nbytes > 0).sum()), peak_bytes=peak_bytes,
            outside_allocated_bytes=allocated - int(_column_sum(table, "self_allocated_bytes")),
            outside_peak_bytes=peak_bytes - int(_column_sum(table, "self_peak_bytes")))
        return summary, table

    return store.derived.get(run_id, f"op_memory:{int(by_shape)}", build)


def _column_sum(table: pa.Table, column: str) -> int:
    return sum(table.column(column).to_pylist())


def add_op_memory(rows: Sequence[OpRow], table: pa.Table) -> None:
    """Each row gets its memory columns (0 for a row no op of which saw an event)."""
    cols = {c: table.column(c).to_pylist() for c in OP_MEMORY_COLUMNS}
    at = {(n, s): i for i, (n, s) in enumerate(zip(table.column("name").to_pylist(),
                                                    table.column("input_shapes").to_pylist(), strict=True))}
    for row in rows:
        i = at.get((row["name"], row["input_shapes"]))
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
