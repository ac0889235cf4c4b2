"""The op table's rule per op event, for a reader without the server (the offline report): one row per event
key_averages() counts, with what a range of them sums to, so aggregating the events that start in a range
gives load_ops_in_range's answer. No I/O."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from explorer.analysis.op_stats import OpEvents, compute_op_events


def compute_op_event_rows(slices: pa.Table, origin_ns: int, flows: pa.Table | None = None) -> dict[str, Any]:
    """Columns (lists) per op event, earliest first: slice `id`, `ts` (relative ns), `name` (code into
    `names`), `python`, `dur`, `self_cpu`, `self_device`, `device_total`, `outer_same` (position of
    the nearest enclosing event of the same name, -1 for none)."""
    if slices.num_rows == 0:
        return {k: [] for k in ("names", "id", "ts", "name", "python", "dur", "self_cpu", "self_device",
                                "device_total", "outer_same")}
    ev = compute_op_events(slices, flows)  # (with flows, runtime calls that launched outside any op are events)
    # the row names this range uses, in the order the events first name them
    used, first, codes = np.unique(ev.key_codes, return_index=True, return_inverse=True)
    rank = np.argsort(first, kind="stable")
    renumber = np.empty(len(used), dtype=np.int64)
    renumber[rank] = np.arange(len(used))
    codes = renumber[codes]
    names = ev.key_names.take(pa.array(used[rank]))
    ts = slices.column("ts_ns").to_numpy()[ev.ops] - origin_ns
    order = np.lexsort((ev.ops, ts))
    outer = _outer_same(ev, codes)
    position = np.full(len(ev.ops) + 1, -1, dtype=np.int64)  # event index -> its row in `order`; -1 stays -1
    position[order] = np.arange(len(order))
    return {
        "names": names.to_pylist(),
        "id": slices.column("slice_id").to_numpy()[ev.ops][order].tolist(),
        "ts": ts[order].tolist(),
        "name": codes[order].tolist(),
        "python": ev.python[order].astype(bool).tolist(),
        "dur": ev.dur[order].tolist(),
        "self_cpu": ev.self_cpu[order].tolist(),
        "self_device": ev.row_device[ev.ops][order].tolist(),
        "device_total": _subtree_device(ev)[ev.ops][order].tolist(),
        "outer_same": position[outer[order]].tolist(),
    }


def _subtree_device(ev: OpEvents) -> np.ndarray:
    """Per slice: the device time launched by it or any node below it in the op tree."""
    total = np.zeros(len(ev.tparent), dtype=np.int64)
    cur = np.nonzero(ev.self_dev > 0)[0]
    amount = ev.self_dev[cur]
    while len(cur):
        np.add.at(total, cur, amount)
        cur = ev.tparent[cur]
        keep = cur >= 0
        cur, amount = cur[keep], amount[keep]
    return total


def _outer_same(ev: OpEvents, codes: np.ndarray) -> np.ndarray:
    """Per op event: the index (into ev.ops) of its nearest enclosing op event of the same name, else -1."""
    index_of = np.full(len(ev.tparent), -1, dtype=np.int64)
    index_of[ev.ops] = np.arange(len(ev.ops))
    code_of = np.full(len(ev.tparent), -1, dtype=np.int64)
    code_of[ev.ops] = codes
    out = np.full(len(ev.ops), -1, dtype=np.int64)
    who, cur = np.arange(len(ev.ops)), ev.tparent[ev.ops]
    while len(who):
        live = cur >= 0
        who, cur = who[live], cur[live]
        same = code_of[cur] == codes[who]
        out[who[same]] = index_of[cur[same]]
        who, cur = who[~same], ev.tparent[cur[~same]]
    return out
