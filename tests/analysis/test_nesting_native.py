"""Nesting's stack pass compiled (explorer/analysis/_nest.c) against the numpy and Python way it replaces, on
generated slices that hit every rule: nested chains, equal starts, empty slices, partial overlaps moved to
sub-rows, and more overlapping rows than MAX_SUB_ROWS allows."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.analysis import nesting


def slices(seed: int, n: int, threads: int, span: int, overlaps: bool) -> tuple[np.ndarray, ...]:
    """n slices on `threads` threads: nested calls (a child inside its parent), with `overlaps` some that
    start inside another and end after it; coarse times, so equal starts and ends and empty slices abound."""
    rng = np.random.default_rng(seed)
    thread = rng.integers(0, threads, n)
    lane = rng.integers(0, 3, n)
    ts = rng.integers(0, span, n)
    dur = rng.integers(0, span // 4 + 1, n) * rng.integers(0, 2, n)  # half of them empty
    if not overlaps:  # a proper tree per thread: children side by side inside their parent, touching or not
        ts, dur = np.zeros(n, np.int64), np.zeros(n, np.int64)
        for t in range(threads):
            mine = np.flatnonzero(thread == t).tolist()
            made: list[tuple[int, int]] = []
            while len(made) < len(mine):  # top-level trees side by side, each in a window of its own
                w = len(made) * 10**6
                made += tree(rng, w, w + 10**6 - 1, len(mine) - len(made))
            ts[mine], dur[mine] = [a for a, _ in made], [b - a for a, b in made]
    return thread.astype(np.int64), lane.astype(np.int64), ts.astype(np.int64), dur.astype(np.int64)


def tree(rng: np.random.Generator, lo: int, hi: int, count: int) -> list[tuple[int, int]]:
    """`count` (start, end) spans inside [lo, hi] that nest properly: children one after another inside each
    span (touching or with gaps, some empty), each holding a share of the rest."""
    out: list[tuple[int, int]] = []
    at = lo
    while len(out) < count and at <= hi:
        a = min(hi, at + int(rng.integers(0, 3)) * (hi - lo) // 50)
        b = a if rng.random() < 0.2 else min(hi, a + int(rng.integers(0, max(1, (hi - a) // 2)) + 1))
        inner = min(count - len(out) - 1, int(rng.integers(0, 6)))
        out.append((a, b))
        out += tree(rng, a, b, inner) if b > a else []
        at = b
        if at == hi:
            break
    return out[:count]


def both_ways(monkeypatch: pytest.MonkeyPatch, *cols: np.ndarray) -> tuple[nesting.Nesting, nesting.Nesting]:
    compiled = nesting.compute_nesting(*cols)
    monkeypatch.setattr(nesting, "_LIB", None)
    python = nesting.compute_nesting(*cols)
    monkeypatch.undo()
    return compiled, python


@pytest.fixture(autouse=True)
def built() -> None:
    assert nesting._LIB is not None, "explorer/analysis/_nest.so.1 is not built (hatch_build.py builds it at install)"


@pytest.mark.parametrize("overlaps", [False, True], ids=["proper trees", "partial overlaps"])
@pytest.mark.parametrize("seed", range(12))
def test_compiled_and_python_nesting_agree(seed: int, overlaps: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    cols = slices(seed, n=3000, threads=1 + seed % 5, span=200 if overlaps else 50, overlaps=overlaps)
    compiled, python = both_ways(monkeypatch, *cols)
    assert np.array_equal(compiled.parent, python.parent)
    assert np.array_equal(compiled.sub_row, python.sub_row)
    assert compiled.displaced_rows == python.displaced_rows
    if overlaps:
        assert python.displaced_rows > 0  # the case is what it says
    else:
        assert python.displaced_rows == 0 and (python.parent >= 0).any()


def test_past_the_last_sub_row_both_keep_the_slice_at_the_top(monkeypatch: pytest.MonkeyPatch) -> None:
    """A staircase of partial overlaps on one thread, more than MAX_SUB_ROWS deep: the last row takes the rest."""
    monkeypatch.setattr(nesting, "MAX_SUB_ROWS", 3)
    n = 12
    cols = (np.zeros(n, np.int64), np.zeros(n, np.int64), np.arange(n, dtype=np.int64) * 10,
            np.full(n, 1000, np.int64))  # each starts inside every one before it and ends after them
    compiled = nesting.compute_nesting(*cols)
    monkeypatch.setattr(nesting, "_LIB", None)
    python = nesting.compute_nesting(*cols)
    assert np.array_equal(compiled.parent, python.parent) and np.array_equal(compiled.sub_row, python.sub_row)
    assert int(python.sub_row.max()) == 3


def test_the_compiled_pass_nests_by_hand_worked_example() -> None:
    """P [0, 10] holds A [0, 4] and B [4, 8]; E, empty at 4, is B's child (A ended at 4); C [6, 12] starts
    inside B and ends after P: it moves to sub-row 1."""
    names = ["P", "A", "B", "E", "C"]
    ts = np.array([0, 0, 4, 4, 6], np.int64)
    dur = np.array([10, 4, 4, 0, 6], np.int64)
    out = nesting.compute_nesting(np.zeros(5, np.int64), np.zeros(5, np.int64), ts, dur)
    parent = {names[i]: (names[p] if p >= 0 else None) for i, p in enumerate(out.parent.tolist())}
    assert parent == {"P": None, "A": "P", "B": "P", "E": "B", "C": None}
    assert out.sub_row.tolist() == [0, 0, 0, 0, 1]
