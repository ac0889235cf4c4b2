"""Warm-up in the profile: first calls the steady state does not repeat (autotuning on an op's first call per
shape, modules loaded on a kernel's first launch, context creation), found by their time beyond the op's later
calls; the host-bound rule leaves the gaps inside them out. Thresholds and formula: docs/advice.md."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.advice.finding import Context, fact, make_finding, page_link, timeline_link
from explorer.analysis.advice.ops import OP_CATEGORIES, nearest_ancestor
from explorer.model.advice_shapes import Finding
from explorer.model.lanes import Lane

I64 = np.int64
WARMUP_FACTOR = 10  # a first call at least 10x the median of the op's later calls
WARMUP_MIN_NS = 1_000_000  # and at least 1 ms beyond that median
WARMUP_MIN_CALLS = 3  # an op (with those shapes) called fewer times has no steady state to compare with
WARMUP_MIN_DEN = 20  # listed when the warm-up is at least 1/20 of the span
LAUNCH = re.compile(r"^(cuda|cu|hip)(Ext)?(Module)?LaunchKernel|^cudaLaunchKernelExC|^cuLaunchKernelEx")
# runtime calls that return when the device is done (a synchronous copy, a synchronize): time in them is a wait
WAIT = re.compile(r"Synchronize|MemcpyWithStream|^(cuda|hip|cu)Memcpy")  # ... but not an *Async call


NO_RANK = -1


@dataclass(frozen=True)
class Warmup:
    """The warm-up calls (slice indices, outermost), their time beyond their steady state (ns), and their
    intervals relative to the run's origin with their rank (NO_RANK: unknown)."""

    slices: np.ndarray
    excess_ns: np.ndarray
    intervals: list[tuple[int, int, int]]

    @property
    def total_ns(self) -> int:
        return int(self.excess_ns.sum())

    def covers(self, start: int, end: int, rank: int | None = None) -> bool:
        """Whether [start, end) (relative ns) of `rank`'s device lies at least half inside one warm-up call of
        that rank (a rank unknown on either side matches any)."""
        return any(2 * (min(end, b) - max(start, a)) >= end - start for a, b, r in self.intervals
                   if rank is None or rank == NO_RANK or r in (NO_RANK, rank))


def _mask(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), bool)


def _first_call_excess(idx: np.ndarray, codes: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Per slice of `idx` (grouped by `codes`): its time beyond the median of the group's later calls when it is
    the group's first call and meets the thresholds, else 0."""
    out = np.zeros(len(idx), I64)
    order = np.lexsort((ts[idx], codes))
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    for group in np.split(order, bounds):
        if len(group) < WARMUP_MIN_CALLS:
            continue
        first, rest = group[0], dur[idx[group[1:]]]
        median = int(np.median(rest))
        d = int(dur[idx[first]])
        if d >= WARMUP_FACTOR * max(median, 1) and d - median >= WARMUP_MIN_NS:
            out[first] = d - median
    return out


def _wait_within(parent: np.ndarray, waits: np.ndarray, dur: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Per slice: the time of the wait calls `waits` below it, kept for the slices `of` marks."""
    n = len(parent)
    out = np.zeros(n, I64)
    cur, amount = parent[waits], dur[waits]
    for _ in range(256):  # nesting depth bound: a cycle in bad input cannot loop forever
        live = (cur >= 0) & (cur < n)
        cur, amount = cur[live], amount[live]
        if not len(cur):
            break
        hit = of[cur]
        np.add.at(out, cur[hit], amount[hit])
        cur = parent[cur]
    return out


def _slice_ranks(slices: pa.Table, track_ranks: dict[int, int] | None) -> np.ndarray:
    """Each slice's rank from its track's (NO_RANK where unknown)."""
    track = slices.column("track_id").to_numpy().astype(I64)
    if not track_ranks or not len(track):
        return np.full(len(track), NO_RANK, I64)
    lookup = np.full(max(int(track.max()), max(track_ranks)) + 1, NO_RANK, I64)
    for t, r in track_ranks.items():
        if t >= 0:
            lookup[t] = r
    return np.where(track >= 0, lookup[np.maximum(track, 0)], NO_RANK)


def _device_busy_within(slices: pa.Table, a: np.ndarray, b: np.ndarray, of: np.ndarray | None = None) -> np.ndarray:
    """Per interval [a, b): the time some device execution ran in it (the union of the executions `of` marks,
    else all)."""
    dev = np.flatnonzero(_mask(slices.column("device_time")) & (True if of is None else of))
    if not len(dev):
        return np.zeros(len(a), I64)
    ts = slices.column("ts_ns").to_numpy().astype(I64)[dev]
    end = ts + slices.column("dur_ns").to_numpy().astype(I64)[dev]
    order = np.argsort(ts, kind="stable")
    ts, end = ts[order], np.maximum.accumulate(end[order])
    new = np.ones(len(ts), bool)
    new[1:] = ts[1:] > end[:-1]
    starts = ts[new]
    ends = np.append(end[np.flatnonzero(new)[1:] - 1], end[-1])
    cum = np.concatenate(([0], np.cumsum(ends - starts)))

    def upto(t: np.ndarray) -> np.ndarray:  # busy time before t
        k = np.searchsorted(starts, t, side="right")
        last = np.maximum(k - 1, 0)
        inside = np.where(k > 0, np.clip(t - starts[last], 0, ends[last] - starts[last]), 0)
        return np.asarray(cum[last] * (k > 0) + inside, I64)

    return np.asarray(upto(b) - upto(a), I64)


def find_warmup(slices: pa.Table, origin_ns: int, shapes: dict[int, str] | None = None,
                track_ranks: dict[int, int] | None = None) -> Warmup:
    """An op's calls are grouped by thread (each rank's own), name and, with `shapes` (the ops' Input Dims by
    slice id), shapes: cuDNN autotunes once per shape. A call's device is its rank's (`track_ranks`)."""
    lane = slices.column("lane")
    ops = np.flatnonzero(_mask(pc.equal(lane, Lane.FRAMEWORK)) &
                         _mask(pc.is_in(slices.column("cat"), pa.array(OP_CATEGORIES))))
    names = slices.column("name")
    runtime = _mask(pc.equal(lane, Lane.RUNTIME))
    launch = np.flatnonzero(runtime & _mask(pc.match_substring_regex(names, LAUNCH.pattern)))
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    excess = np.zeros(slices.num_rows, I64)
    if len(ops):
        op_names = names.take(pa.array(ops)).to_pylist()
        sid = slices.column("slice_id").to_numpy().astype(I64)[ops].tolist()
        thread = slices.column("track_id").to_numpy().astype(I64)[ops].tolist()
        keys = [f"{t}\x00{n}\x00{(shapes or {}).get(i, '')}" for t, n, i in zip(thread, op_names, sid, strict=True)]
        codes = np.asarray(pa.array(keys).dictionary_encode().indices, I64)
        excess[ops] = _first_call_excess(ops, codes, ts, dur)
    if len(launch) >= WARMUP_MIN_CALLS:
        median = int(np.median(dur[launch]))
        over = dur[launch] - median
        slow = (dur[launch] >= WARMUP_FACTOR * max(median, 1)) & (over >= WARMUP_MIN_NS)
        excess[launch[slow]] = over[slow]
    parent = slices.column("parent_id").to_numpy().astype(I64)
    rank = _slice_ranks(slices, track_ranks)
    cand = np.flatnonzero(excess)
    if len(cand):  # a call that spent most of its time waiting on the device, or with the device busy, is no set-up
        busy = np.zeros(len(cand), I64)
        for r in np.unique(rank[cand]).tolist():  # its own rank's devices (all, where the rank is unknown)
            mine = rank[cand] == r
            busy[mine] = _device_busy_within(slices, ts[cand[mine]], ts[cand[mine]] + dur[cand[mine]],
                                             None if r == NO_RANK else rank == r)
        waits = runtime & _mask(pc.match_substring_regex(names, WAIT.pattern)) & ~_mask(
            pc.match_substring(names, "Async"))
        waited = _wait_within(parent, np.flatnonzero(waits), dur, excess > 0)[cand]
        excess[cand[(2 * busy > dur[cand]) | (2 * waited > dur[cand])]] = 0
    hit = excess > 0
    found = np.flatnonzero(hit)
    outer = found[nearest_ancestor(parent, found, hit) < 0]
    outer = outer[np.argsort(-excess[outer], kind="stable")]
    return Warmup(outer, excess[outer], [(int(ts[i]) - origin_ns, int(ts[i] + dur[i]) - origin_ns, int(rank[i]))
                                         for i in outer])


def warmup_finding(ctx: Context, slices: pa.Table, w: Warmup) -> list[Finding]:
    if not len(w.slices) or w.total_ns * WARMUP_MIN_DEN < ctx.span_ns:
        return []
    names = [str(n) for n in slices.column("name").take(pa.array(w.slices)).to_pylist()]
    launches = sum(1 for n in names if LAUNCH.match(n))
    top = names[0]
    a, b, _ = w.intervals[0]
    return [make_finding(
        ctx, "warm-up", f"The profile includes warm-up: {len(w.slices)} first calls far slower than later ones, "
        f"{top} first",
        f"{len(w.slices)} calls ran far slower than the later calls of the same op (at least {WARMUP_FACTOR}× their "
        "median and 1 ms beyond it): cuDNN / cuBLAS autotuning on the first call per shape, CUDA modules loaded on "
        "a kernel's first launch, context creation, torch.compile. The steady state does not repeat them, so the "
        "host-bound finding leaves the device gaps inside them out.",
        [fact("first calls far slower than their op's later calls", len(w.slices) - launches, "count"),
         fact("launch calls far slower than the median launch", launches, "count"),
         fact("their time beyond their steady state", w.total_ns)],
        [timeline_link(ctx, f"the longest: {top}", a, b), page_link(ctx, "ops", "op table", "ops")],
        "Profile the steady state: torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=2, "
        "active=3), ...) and call prof.step() every iteration, or run a few iterations before profiling. "
        "CUDA_MODULE_LOADING=EAGER moves module loading to start-up.",
        None, w.total_ns, "not timed: the steady state never pays it; the time is the first calls' excess over "
        "their op's median (launch calls: over the run's median launch)", "high", "small")]
