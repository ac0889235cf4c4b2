"""The timeline index's pre-aggregated levels (explorer.analysis.timeline.levels) against plain loops over the same
random slices: each run reduced to its first start, last end, count, busy time, longest slice and that slice's
name (the first of the longest); each level folding the slices shorter than its bin per (group, bin), whether
it is built in one piece or in many (cut inside groups too)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.analysis.timeline import levels as lod_pyramid
from explorer.analysis.timeline.levels import Items, build_levels, reduce_runs

I64 = np.int64


def _random_items(rng: np.random.Generator, n: int) -> Items:
    ts = np.sort(rng.integers(0, 10_000, n)).astype(I64)
    longest = rng.integers(1, 6, n).astype(I64)  # few values: ties within a run are common
    return Items(slot=rng.integers(0, 4, n).astype(I64), ts=ts, end=ts + rng.integers(0, 50, n),
                 count=rng.integers(1, 4, n).astype(I64), busy=rng.integers(0, 9, n).astype(I64), longest=longest,
                 name=rng.integers(0, 1000, n).astype(np.int32), depth=rng.integers(0, 3, n).astype(np.int32))


@pytest.mark.parametrize("seed", range(20))
def test_reduce_runs_matches_a_loop_over_the_runs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    items = _random_items(rng, n)
    first = np.flatnonzero(np.r_[True, rng.random(n - 1) < 0.3])
    got = reduce_runs(items, first)
    bounds = [*first.tolist(), n]
    for k, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        top = int(items.longest[a:b].max())
        assert (got.slot[k], got.ts[k], got.depth[k]) == (items.slot[a], items.ts[a], items.depth[a])
        assert got.end[k] == items.end[a:b].max() and got.longest[k] == top
        assert got.count[k] == items.count[a:b].sum() and got.busy[k] == items.busy[a:b].sum()
        assert got.name[k] == items.name[a + int(np.flatnonzero(items.longest[a:b] == top)[0])]
    assert len(got) == len(first)


@pytest.mark.parametrize("piece", [lod_pyramid.LEVEL_PIECE, 64, 7])
@pytest.mark.parametrize("seed", range(10))
def test_each_level_folds_the_short_slices_per_group_and_bin(seed: int, piece: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lod_pyramid, "LEVEL_PIECE", piece)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 3000))
    group_of = np.sort(rng.integers(0, 6, n)).astype(I64)
    ts = np.zeros(n, I64)
    for g in np.unique(group_of):  # sorted by group, then time
        mine = group_of == g
        ts[mine] = np.sort(rng.integers(0, 2_000_000, int(mine.sum())))
    dur = rng.choice([100, 1_000, 5_000, 30_000, 200_000], n).astype(I64)
    name = rng.integers(0, 50, n).astype(np.int32)
    group_depth = rng.integers(0, 4, int(group_of.max()) + 1).astype(np.int32)
    levels = build_levels(ts, dur, name, group_of, group_depth, int((ts + dur).max() - ts.min()))
    assert levels  # (a level is kept where it folds the slices at least MIN_FOLD times)
    for level in levels:
        short = np.flatnonzero(dur < level.bin_ns)
        runs: list[list[int]] = []
        for i in short.tolist():
            if runs and (group_of[runs[-1][0]], ts[runs[-1][0]] // level.bin_ns) == (group_of[i], ts[i] // level.bin_ns):
                runs[-1].append(i)
            else:
                runs.append([i])
        bins = level.bins
        assert len(bins) == len(runs)
        for k, run in enumerate(runs):
            members = np.asarray(run)
            top = int(dur[members].max())
            assert bins.slot[k] == group_of[run[0]] and bins.depth[k] == group_depth[group_of[run[0]]]
            assert bins.ts[k] == ts[run[0]] and bins.end[k] == (ts[members] + dur[members]).max()
            assert bins.count[k] == len(run) and bins.busy[k] == dur[members].sum() and bins.longest[k] == top
            assert bins.name[k] == name[members[np.flatnonzero(dur[members] == top)[0]]]
        assert level.long_pos.tolist() == np.flatnonzero(dur >= level.bin_ns).tolist()
