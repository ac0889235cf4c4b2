"""Interval arithmetic in integer ns: the union of [start, end) intervals. Nothing run-specific here."""

from __future__ import annotations

import numpy as np

I64 = np.int64


def union_segments(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint [start, end) segments covering the given intervals (any order)."""
    if not len(ts):
        return np.zeros(0, I64), np.zeros(0, I64)
    order = np.argsort(ts, kind="stable")
    ts, end = ts[order], np.maximum.accumulate(end[order])
    new = np.empty(len(ts), bool)
    new[0] = True
    new[1:] = ts[1:] > end[:-1]
    starts = np.flatnonzero(new)
    seg_end = end[np.append(starts[1:] - 1, len(ts) - 1)]
    return ts[starts], seg_end


def union_ns(ts: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of [ts, end) intervals."""
    a, b = union_segments(ts, end)
    return int((b - a).sum())


def overlapping(starts: np.ndarray, ends_max: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Indices of the intervals overlapping [lo, hi), given `starts` sorted and `ends_max` the running
    maximum of their ends (np.maximum.accumulate): only the run of candidates between the first interval
    that may still be open at `lo` and the last starting before `hi` is scanned."""
    first = int(np.searchsorted(ends_max, lo, side="right"))
    last = int(np.searchsorted(starts, hi, side="left"))
    if first >= last:
        return np.zeros(0, np.int64)
    return first + np.flatnonzero(ends[first:last] > lo)


def covered_between(seg_start: np.ndarray, seg_end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For disjoint sorted segments (union_segments' output), the length of their part inside each
    window [lo[i], hi[i]) - all windows at once, by prefix sums (no loop per window)."""
    inside: np.ndarray = _covered_before(seg_start, seg_end, hi) - _covered_before(seg_start, seg_end, lo)
    return inside


def _covered_before(seg_start: np.ndarray, seg_end: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Length of the segments' union below each x."""
    if not len(seg_start):
        return np.zeros(len(x), I64)
    before = np.concatenate([np.zeros(1, I64), np.cumsum(seg_end - seg_start)])
    j = np.searchsorted(seg_start, x, side="right") - 1
    k = np.maximum(j, 0)
    covered: np.ndarray = np.where(j >= 0, before[k] + np.minimum(x, seg_end[k]) - seg_start[k], 0)
    return covered
