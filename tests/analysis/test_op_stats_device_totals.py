"""The op table's device totals on random op trees with recursive names: each launch counts once per row
however often the row's name recurs above it, equal to a plain walk up each launching op's ancestors with
a set of the rows met (also through the sorting fallback for chains deeper than DEDUP_LEVELS)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import explorer.analysis.op_stats as op_stats
from explorer.analysis.op_stats import OpEvents, _device_totals


def random_op_tree(n: int, names: int, seed: int) -> tuple[OpEvents, np.ndarray]:
    """n ops in one forest (deep chains and bushy levels), names drawn from `names` (so they recur on
    chains), device time on about a third of them; and each op's row code."""
    rng = np.random.default_rng(seed)
    tparent = np.full(n, -1, dtype=np.int64)
    for i in range(1, n):
        if rng.random() > 0.05:
            tparent[i] = i - 1 if rng.random() < 0.6 else int(rng.integers(0, i))
    codes = rng.integers(0, names, n).astype(np.int64)
    self_dev = np.where(rng.random(n) < 0.3, rng.integers(1, 1000, n), 0).astype(np.int64)
    ops = np.arange(n, dtype=np.int64)
    empty = np.zeros(n, dtype=np.int64)
    no_text = pa.array([], pa.string())
    ev = OpEvents(ops=ops, key_codes=codes, key_names=no_text, shape_codes=empty, shape_names=no_text,
                  python=np.zeros(n, bool), dur=empty, self_cpu=empty, self_dev=self_dev, tparent=tparent, device_all=int(self_dev.sum()))
    return ev, codes


def walked_totals(ev: OpEvents, codes: np.ndarray, groups: int) -> np.ndarray:
    total = np.zeros(groups, dtype=np.int64)
    for origin in np.nonzero(ev.self_dev > 0)[0]:
        met: set[int] = set()
        node = int(origin)
        while node >= 0:
            met.add(int(codes[node]))
            node = int(ev.tparent[node])
        for row in met:
            total[row] += ev.self_dev[origin]
    return total


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("levels", [op_stats.DEDUP_LEVELS, 3])
def test_device_totals_count_each_launch_once_per_row(seed: int, levels: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(op_stats, "DEDUP_LEVELS", levels)
    ev, codes = random_op_tree(400, names=6, seed=seed)
    assert np.array_equal(_device_totals(ev, codes, 6), walked_totals(ev, codes, 6))
