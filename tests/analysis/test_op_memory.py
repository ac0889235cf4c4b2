"""innermost(): which op an event at a time belongs to, closed intervals, crossing ranges (a ProfilerStep across
Python frames) included. The columns themselves are tested on real captures in tests/views/test_op_memory.py."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.analysis.op_memory import innermost


@pytest.mark.parametrize(("spans", "times", "want"), [
    ([], [5], [-1]),
    ([(0, 10)], [0, 10, 11], [0, 0, -1]),  # both ends hold the event, as torch's MemRecordsAcc
    ([(0, 10), (2, 4)], [1, 2, 4, 5], [0, 1, 1, 0]),  # nested: the child, then the parent again
    ([(0, 10), (4, 8), (6, 12)], [5, 7, 9, 11], [1, 2, 2, 2]),  # (6, 12) crosses (0, 10): the latest start wins
    ([(0, 3), (3, 6)], [3], [1]),  # back to back: the one that starts there
    ([(0, 10), (0, 4)], [2, 6], [1, 0]),  # same start: the shorter is the inner one
])
def test_innermost(spans: list[tuple[int, int]], times: list[int], want: list[int]) -> None:
    start = np.asarray([s for s, _ in spans], np.int64)
    end = np.asarray([e for _, e in spans], np.int64)
    assert innermost(start, end, np.asarray(times, np.int64)).tolist() == want
