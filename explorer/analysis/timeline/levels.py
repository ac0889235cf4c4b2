"""Pre-aggregated levels that keep wide timeline windows cheap on traces of millions of slices: per level,
slices shorter than its bin size are folded into per-(track, depth) bins, longer ones stay, and a window
reads the coarsest level that fits its ns per pixel. No I/O. Levels: docs/architecture.md,
"analysis/timeline/levels.py"."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, fields

import numpy as np

I64 = np.int64
LEVEL_FACTOR = 4
FIRST_BIN_NS = 4_000
# a level is worth keeping only when it folds the slices at least this much
MIN_FOLD = 2.0


@dataclass
class Items:
    """Struct of arrays: single slices (count 1) or runs of them, each on one (track, depth) group."""

    slot: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    count: np.ndarray
    busy: np.ndarray
    longest: np.ndarray
    name: np.ndarray
    depth: np.ndarray

    def take(self, idx: np.ndarray) -> Items:
        return Items(*(getattr(self, f.name)[idx] for f in fields(self)))

    def __len__(self) -> int:
        return len(self.ts)


def concat_items(*parts: Items) -> Items:
    """The parts' items, one after another (each field concatenated once)."""
    return Items(*(np.concatenate([getattr(part, f.name) for part in parts]) for f in fields(Items)))


def reduce_runs(items: Items, first: np.ndarray) -> Items:
    """One item per run; runs are consecutive index ranges starting at `first` (sorted, non-empty)."""
    if not len(first):
        return items.take(np.zeros(0, I64))
    longest = np.maximum.reduceat(items.longest, first)
    counts = np.diff(np.append(first, len(items)))
    # the first item of each run as long as the run's longest: hits are ascending, and so are their runs
    hits = np.flatnonzero(items.longest == np.repeat(longest, counts))
    run_of_hit = np.searchsorted(first, hits, side="right") - 1
    first_hit = hits[np.flatnonzero(np.diff(run_of_hit, prepend=-1))]
    return Items(slot=items.slot[first], ts=items.ts[first], end=np.maximum.reduceat(items.end, first),
                 count=np.add.reduceat(items.count, first), busy=np.add.reduceat(items.busy, first),
                 longest=longest, name=items.name[first_hit], depth=items.depth[first])


def running_max_per_group(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Running maximum of `values` within each range [lo_i, hi_i) (consecutive ranges that cover it)."""
    return segmented_running_max(values, np.repeat(np.arange(len(lo), dtype=I64), hi - lo))


def segmented_running_max(values: np.ndarray, group: np.ndarray, in_place: bool = False) -> np.ndarray:
    """Running maximum of `values` restarted at every change of `group` (sorted by group). A scan by
    doubling steps, vectorised: log2(longest group) passes, never a Python loop per group (a run may
    have a million single-slice tracks). `in_place`: into `values` itself."""
    out = values if in_place else values.copy()
    n, step = len(out), 1
    while step < n:
        same = group[step:] == group[:-step]
        if not same.any():
            break
        np.maximum(out[step:], np.where(same, out[:-step], out[step:]), out=out[step:])
        step *= 2
    return out


def group_ranges(group_of: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) per group id of an array sorted by group."""
    ids = np.arange(n_groups)
    return (np.searchsorted(group_of, ids, side="left").astype(I64),
            np.searchsorted(group_of, ids, side="right").astype(I64))


def window_ranges(ts: np.ndarray, end_max: np.ndarray, lo: np.ndarray, hi: np.ndarray, groups: np.ndarray,
                  start_ns: int, end_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Per selected group, the index range that can overlap [start, end]: two binary searches each
    (end_max is the running max of ends, so slices starting long before the window are found)."""
    out_lo = np.empty(len(groups), I64)
    out_hi = np.empty(len(groups), I64)
    for i, g in enumerate(groups.tolist()):
        a, b = int(lo[g]), int(hi[g])
        out_lo[i] = a + int(np.searchsorted(end_max[a:b], start_ns, side="left"))
        out_hi[i] = a + int(np.searchsorted(ts[a:b], end_ns, side="right"))
    return out_lo, np.maximum(out_hi, out_lo)


def gather(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated positions of the ranges [lo_i, hi_i), and the range number i of each."""
    counts = hi - lo
    slot = np.repeat(np.arange(len(lo), dtype=I64), counts)
    offsets = np.cumsum(counts) - counts
    pos = np.arange(int(counts.sum()), dtype=I64) - np.repeat(offsets, counts) + np.repeat(lo, counts)
    return pos, slot


@dataclass
class Level:
    bin_ns: int
    long_pos: np.ndarray  # positions (into the index arrays) of slices >= bin_ns, by group then ts
    long_ts: np.ndarray
    long_end_max: np.ndarray
    long_lo: np.ndarray
    long_hi: np.ndarray
    bins: Items  # slot = group id
    bin_end_max: np.ndarray
    bin_lo: np.ndarray
    bin_hi: np.ndarray


# a level is built a piece of about this many positions at a time (cut where no run of short slices spans the
# cut): what a piece makes and drops is ~70 bytes a position, so the build's peak does not grow with the run
LEVEL_PIECE = 1 << 20


def build_levels(ts: np.ndarray, dur: np.ndarray, name: np.ndarray, group_of: np.ndarray,
                 group_depth: np.ndarray, span_ns: int) -> list[Level]:
    """Levels from FIRST_BIN_NS up to the span, skipping those that would not fold the slices."""
    return list(iter_levels(ts, dur, name, group_of, group_depth, span_ns, LEVEL_PIECE))


def iter_levels(ts: np.ndarray, dur: np.ndarray, name: np.ndarray, group_of: np.ndarray,
                group_depth: np.ndarray, span_ns: int, piece: int, pool: Executor | None = None) -> Iterator[Level]:
    """build_levels' levels one at a time (a caller that writes each away holds one), built `piece` positions
    at a time; with `pool`, on its threads, in order (a level depends on the slices only, not on another level:
    numpy's passes run outside the GIL, two levels at a time on two threads)."""
    sizes = []
    bin_ns = FIRST_BIN_NS
    while len(ts) and bin_ns <= max(span_ns, 1):
        sizes.append(bin_ns)
        bin_ns *= LEVEL_FACTOR

    def one(size: int) -> Level | None:
        return build_level(ts, dur, name, group_of, group_depth, size, piece)

    for level in (pool.map(one, sizes) if pool is not None else map(one, sizes)):
        if level is not None:
            yield level
        del level  # (nor does this frame hold a level once the caller has it)


def build_level(ts: np.ndarray, dur: np.ndarray, name: np.ndarray, group_of: np.ndarray, group_depth: np.ndarray,
                bin_ns: int, piece: int) -> Level | None:
    """The level of bins `bin_ns` wide, None where it would not fold the slices MIN_FOLD times."""
    short = dur < bin_ns
    cuts = _piece_cuts(ts, group_of, bin_ns, piece)
    # the runs' starts per piece (as indices into the piece's short slices): counted first, the level is
    # built only where it folds the slices enough
    firsts = [_run_starts(ts, group_of, np.flatnonzero(short[a:b]) + a, bin_ns)
              for a, b in zip(cuts, cuts[1:], strict=False)]
    n_short, n_runs = int(np.count_nonzero(short)), sum(len(f) for f in firsts)
    if not n_short or n_short / max(n_runs, 1) < MIN_FOLD:
        return None
    # each piece's runs go straight into the level's arrays (no list of pieces to concatenate: the level's bins
    # held once), each piece's short positions found again (kept from the count, they would be 8 bytes a slice)
    bins: Items | None = None
    at = 0
    for (a, b), first in zip(zip(cuts, cuts[1:], strict=False), firsts, strict=True):
        part = _bins(ts, dur, name, group_of, group_depth, np.flatnonzero(short[a:b]) + a, first)
        bins = bins or Items(*(np.empty(n_runs, getattr(part, f.name).dtype) for f in fields(Items)))
        for f in fields(Items):
            getattr(bins, f.name)[at:at + len(part)] = getattr(part, f.name)
        at += len(part)
        del part
    del firsts
    assert bins is not None and at == n_runs
    return _level(bin_ns, ts, dur, group_of, len(group_depth), short, bins)


def _piece_cuts(ts: np.ndarray, group_of: np.ndarray, bin_ns: int, piece: int) -> list[int]:
    """Cut positions, 0 and len(ts) included, about `piece` apart, each where the group or the bin changes
    (positions are sorted by group, then time): a run of short slices, one group and one bin, never spans one."""
    n = len(ts)
    cuts = [0]
    k = piece
    while k < n:
        group_end = int(np.searchsorted(group_of, group_of[k - 1], side="right"))
        next_bin = (int(ts[k - 1]) // bin_ns + 1) * bin_ns
        cut = k if group_end <= k else k + int(np.searchsorted(ts[k:group_end], next_bin, side="left"))
        if cut >= n:
            break
        cuts.append(cut)
        k = cut + piece
    cuts.append(n)
    return cuts


def _run_starts(ts: np.ndarray, group_of: np.ndarray, p: np.ndarray, bin_ns: int) -> np.ndarray:
    """Where a run starts among the short slices at positions `p`: at each change of (group, bin)."""
    if not len(p):
        return np.zeros(0, I64)
    b = ts[p] // bin_ns
    b -= b.min()
    key = group_of[p].astype(I64) * (int(b.max()) + 1)
    key += b
    del b
    return np.flatnonzero(np.diff(key, prepend=key[0] - 1))


def _bins(ts: np.ndarray, dur: np.ndarray, name: np.ndarray, group_of: np.ndarray, group_depth: np.ndarray,
          p: np.ndarray, first: np.ndarray) -> Items:
    """The short slices at positions `p` folded into their runs (starting at `first`)."""
    g = group_of[p]
    short_ts, short_dur = ts[p], dur[p]
    # busy and longest are the same array, and count a constant one (no memory)
    raw = Items(slot=g, ts=short_ts, end=short_ts + short_dur, count=np.broadcast_to(np.ones(1, I64), len(p)),
                busy=short_dur, longest=short_dur, name=name[p], depth=group_depth[g])
    return reduce_runs(raw, first)


def _level(bin_ns: int, ts: np.ndarray, dur: np.ndarray, group_of: np.ndarray, n_groups: int, short: np.ndarray,
           bins: Items) -> Level:
    bin_lo, bin_hi = group_ranges(bins.slot, n_groups)
    long_pos = np.flatnonzero(~short)
    long_lo, long_hi = group_ranges(group_of[long_pos], n_groups)
    long_ts = ts[long_pos]
    return Level(bin_ns=bin_ns, long_pos=long_pos, long_ts=long_ts,
                 long_end_max=running_max_per_group(long_ts + dur[long_pos], long_lo, long_hi),
                 long_lo=long_lo, long_hi=long_hi, bins=bins,
                 bin_end_max=running_max_per_group(bins.end, bin_lo, bin_hi), bin_lo=bin_lo, bin_hi=bin_hi)


def pick_level(levels: list[Level], ns_per_px: float) -> Level | None:
    """The coarsest level whose bins are no wider than a pixel."""
    best = None
    for level in levels:
        if level.bin_ns <= ns_per_px:
            best = level
    return best
