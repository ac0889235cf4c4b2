"""Slice nesting per thread: parents, sub-rows for partial overlaps, ancestor queries.

Works on numpy columns; the one sequential pass (a stack per thread) is the only Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_SUB_ROWS = 64


@dataclass
class Nesting:
    parent: np.ndarray  # raw index of the enclosing slice on the same thread and sub-row, -1 none
    sub_row: np.ndarray  # 0 normally; k > 0 for slices moved off because they overlapped partially
    displaced_rows: int  # how many slices went to a sub-row


def compute_nesting(thread: np.ndarray, lane: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> Nesting:
    """Nest slices of each thread by time containment.

    A slice that starts inside another but ends after it cannot nest; instead of being dropped it
    moves to the next sub-row of its thread, where the same pass runs again.
    """
    n = len(ts)
    parent = np.full(n, -1, dtype=np.int64)
    sub_row = np.zeros(n, dtype=np.int64)
    pending = np.arange(n, dtype=np.int64)
    row = 0
    while len(pending):
        # longer first on equal start; framework before runtime before hardware on equal spans
        order = pending[np.lexsort((lane[pending], -dur[pending], ts[pending], thread[pending]))]
        displaced = _stack_pass(order, thread, ts, dur, parent, last_row=row >= MAX_SUB_ROWS)
        sub_row[order] = row
        pending = displaced
        row += 1
    return Nesting(parent, sub_row, int(np.count_nonzero(sub_row)))


def _stack_pass(order: np.ndarray, thread: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                parent: np.ndarray, last_row: bool) -> np.ndarray:
    ts_l = ts[order].tolist()
    end_l = (ts[order] + dur[order]).tolist()
    th_l = thread[order].tolist()
    idx_l = order.tolist()
    par = [-1] * len(idx_l)
    displaced: list[int] = []
    stack_end: list[int] = []
    stack_idx: list[int] = []
    cur = None
    for k in range(len(idx_l)):
        t = th_l[k]
        if t != cur:
            cur = t
            stack_end.clear()
            stack_idx.clear()
        s = ts_l[k]
        e = end_l[k]
        while stack_end and stack_end[-1] <= s:
            stack_end.pop()
            stack_idx.pop()
        if stack_end and stack_end[-1] < e:
            if not last_row:
                displaced.append(idx_l[k])
                continue
            # too many overlapping rows: keep the slice at the top level of the last row
            stack_end.clear()
            stack_idx.clear()
        par[k] = stack_idx[-1] if stack_idx else -1
        stack_end.append(e)
        stack_idx.append(idx_l[k])
    parent[order] = np.asarray(par, dtype=np.int64)
    for d in displaced:
        parent[d] = -1
    return np.asarray(displaced, dtype=np.int64)


def nearest_ancestor_where(parent: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """For every slice, its nearest proper ancestor with mask True (-1 when none)."""
    n = len(parent)
    result = np.full(n, -1, dtype=np.int64)
    cur = parent.copy()
    active = np.nonzero(cur >= 0)[0]
    while len(active):
        hit = mask[cur[active]]
        result[active[hit]] = cur[active[hit]]
        active = active[~hit]
        cur[active] = parent[cur[active]]
        active = active[cur[active] >= 0]
    return result


def count_same_track_ancestors(parent: np.ndarray, track: np.ndarray) -> np.ndarray:
    """Depth within a track: how many ancestors lie on the same track."""
    n = len(parent)
    depth = np.zeros(n, dtype=np.int64)
    cur = parent.copy()
    active = np.nonzero(cur >= 0)[0]
    while len(active):
        depth[active] += track[cur[active]] == track[active]
        cur[active] = parent[cur[active]]
        active = active[cur[active] >= 0]
    return depth
