"""Slice nesting per thread: parents, sub-rows for partial overlaps, ancestor queries, over numpy columns (the
stack pass compiled, _nest.c, where built). In model because ingest builds the tree and the store and
analysis walk it; none of those layers may import another."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from explorer.native import loader as native

MAX_SUB_ROWS = 64


@dataclass
class Nesting:
    parent: np.ndarray  # raw index of the enclosing slice on the same thread and sub-row, -1 none
    sub_row: np.ndarray  # int8: 0 normally; k > 0 for slices moved off because they overlapped partially
    displaced_rows: int  # how many slices went to a sub-row


def compute_nesting(thread: np.ndarray, lane: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> Nesting:
    """Nest slices of each thread by time containment.

    A slice that starts inside another but ends after it cannot nest; instead of being dropped it
    moves to the next sub-row of its thread, where the same pass runs again.
    """
    n = len(ts)
    parent = np.full(n, -1, dtype=np.int64)
    sub_row = np.zeros(n, dtype=np.int8)  # at most MAX_SUB_ROWS
    pending = np.arange(n, dtype=np.int64)
    row = 0
    while len(pending):
        # longer first on equal start; framework before runtime before hardware on equal spans
        order = pending[np.lexsort((lane[pending], -dur[pending], ts[pending], thread[pending]))]
        if _LIB is not None:  # the stack pass over every thread, compiled (the two ways agree: tests)
            displaced = _native_stack_pass(order, thread, ts, dur, parent, last_row=row >= MAX_SUB_ROWS)
        else:
            rest = _vector_pass(order, thread, ts, dur, parent)
            displaced = _stack_pass(rest, thread, ts, dur, parent, last_row=row >= MAX_SUB_ROWS)
        sub_row[order] = row
        pending = displaced
        row += 1
    return Nesting(parent, sub_row, int(np.count_nonzero(sub_row)))


def _vector_pass(order: np.ndarray, thread: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                 parent: np.ndarray) -> np.ndarray:
    """Nest each thread's slices (given in nesting order) without a Python loop per slice.

    For a properly nested thread, a slice's depth is the number of earlier slices still open at its
    start, and its parent is the last earlier slice one level up. Threads where that parent does not
    contain the slice have a partial overlap: their slices are returned for the stack pass."""
    th = thread[order]
    cuts = np.flatnonzero(np.diff(th)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(order)]))
    leftovers: list[np.ndarray] = []
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        seg = order[lo:hi]
        par = _nest_segment(ts[seg], ts[seg] + dur[seg])
        if par is None:
            leftovers.append(seg)
        else:
            parent[seg] = np.where(par >= 0, seg[np.maximum(par, 0)], -1)
    return np.concatenate(leftovers) if leftovers else np.zeros(0, dtype=np.int64)


def _nest_segment(s: np.ndarray, e: np.ndarray) -> np.ndarray | None:
    """Parent positions within one thread's sorted slices, or None if they do not nest properly."""
    m = len(s)
    rank = np.arange(m, dtype=np.int64)
    ended = np.searchsorted(np.sort(e), s, side="right")  # slices ended by each start (incl. itself if empty)
    zero = (e == s).astype(np.int64)
    cum = np.cumsum(zero)
    block_end = np.searchsorted(s, s, side="right") - 1
    later_empty = cum[block_end] - cum + zero  # empty slices at the same start, from this one on
    depth = rank - (ended - later_empty)
    if m == 0 or depth.min() < 0:
        return None if m else np.zeros(0, dtype=np.int64)
    keys = depth * m + rank
    sorted_keys = np.sort(keys)
    want = (depth - 1) * m + rank
    idx = np.searchsorted(sorted_keys, want, side="left") - 1
    has = depth > 0
    cand = sorted_keys[np.maximum(idx, 0)]
    ok = has & (idx >= 0) & (cand // m == depth - 1)
    if (has & ~ok).any():
        return None
    par = np.where(has, cand - (depth - 1) * m, -1)
    if (e[par[has]] < e[has]).any():
        return None
    return par


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


def _load() -> ctypes.CDLL | None:
    lib = native.load(native.beside(__file__, "_nest"), "nest_abi", NEST_ABI)
    if lib is not None:
        lib.nest_stack.restype = ctypes.c_int64
        lib.nest_stack.argtypes = (ctypes.c_int64, *[ctypes.c_void_p] * 6, ctypes.c_int64, *[ctypes.c_void_p] * 2)
    return lib


NEST_ABI = 1  # NEST_ABI in _nest.c
_LIB = _load()


def _native_stack_pass(order: np.ndarray, thread: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                       parent: np.ndarray, last_row: bool) -> np.ndarray:
    """_stack_pass in C (_nest.c), over every thread: what it returns and writes to `parent` is the same."""
    assert _LIB is not None and parent.dtype == np.int64 and parent.flags.c_contiguous
    cols = [np.ascontiguousarray(a, dtype=np.int64) for a in (order, thread, ts, dur)]
    n = len(order)
    displaced = np.empty(n, np.int64)
    stack_end, stack_idx = np.empty(n, np.int64), np.empty(n, np.int64)
    moved = _LIB.nest_stack(n, *[a.ctypes.data for a in cols], parent.ctypes.data, displaced.ctypes.data,
                            int(last_row), stack_end.ctypes.data, stack_idx.ctypes.data)
    return displaced[:moved].copy()


def nearest_ancestor_where(parent: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """For every slice, its nearest proper ancestor with mask True (-1 when none).

    Pointer jumping: each slice keeps a pointer up the tree past ancestors known to be unmasked, and
    every round doubles how far those pointers reach, so the work is O(n log depth) whatever the depth
    (a walk one level per round was O(n x depth): minutes for a 100k-deep stack)."""
    up = parent.copy()
    active = np.flatnonzero(up >= 0)
    active = active[~mask[up[active]]]
    while len(active):
        up[active] = up[up[active]]  # synchronous: right-hand side read before the write
        active = active[up[active] >= 0]
        active = active[~mask[up[active]]]
    return up


def count_same_lane_ancestors(parent: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """Depth within a track: how many ancestors lie on the slice's own track.

    A slice's ancestors share its thread and sub-row (nesting never crosses them) and a track is one
    (thread, lane, sub-row), so among ancestors the same lane means the same track. The nearest
    same-lane ancestor comes from pointer jumping per lane, the count from list ranking along those
    links: O(n log depth)."""
    nearest = np.full(len(parent), -1, dtype=np.int64)
    for value in np.unique(lane).tolist():
        own = lane == value
        nearest[own] = nearest_ancestor_where(parent, own)[own]
    return links_to_root(nearest)


def links_to_root(nearest: np.ndarray) -> np.ndarray:
    """For every slice, how many `nearest` links lead from it to a root (-1): list ranking by pointer jumping,
    O(n log depth); int32 (fewer links than slices: < 2**31)."""
    count = (nearest >= 0).astype(np.int32)
    up = nearest.copy()
    active = np.flatnonzero(up >= 0)
    while len(active):
        count[active] += count[up[active]]
        up[active] = up[up[active]]
        active = active[up[active] >= 0]
    return count
