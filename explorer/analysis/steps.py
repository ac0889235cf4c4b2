"""Step view: one row per training step (`ProfilerStep#N`, or a host annotation chosen by name prefix) and, on
a multi-rank run, per rank: its step time and its devices' busy time in it (integer-ns interval
arithmetic), like the TensorBoard profiler's overview. No formatting here."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.gap_evidence import timeline_window
from explorer.analysis.intervals import covered_between, union_segments
from explorer.analysis.kernels import categorize
from explorer.errors import BadRequest
from explorer.model.lanes import Lane
from explorer.model.ranks import NO_RANK, track_ranks
from explorer.model.shapes import StepRow, StepsResult

I64 = np.int64
DEFAULT_STEP_ANNOTATION = "ProfilerStep#"
MAX_ANNOTATION_CHARS = 200
MAX_STEPS = 10_000  # rows listed at most (by rank, then start)
# Step parts in priority order: a moment counts for the first part whose executions run then, so the
# parts and `idle_ns` add up to the step time exactly (overlapped communication shows as compute).
STEP_PARTS = ("compute", "communication", "memcpy", "memset", "other")


def part_of(category: str) -> str:
    """The step part of a kernel category (explorer.analysis.kernels.CATEGORY_RULES): memcpy kinds are one."""
    return "memcpy" if category.startswith("memcpy") else category if category in STEP_PARTS else "other"


def check_annotation(annotation: str) -> str:
    """The name prefix that marks a step; empty or over MAX_ANNOTATION_CHARS is a bad request."""
    if not annotation.strip():
        raise BadRequest("annotation must name a step annotation prefix, e.g. ProfilerStep#")
    if len(annotation) > MAX_ANNOTATION_CHARS:
        raise BadRequest(f"annotation is longer than {MAX_ANNOTATION_CHARS} characters")
    return annotation


def slice_ranks(slices: pa.Table, tracks: pa.Table | None) -> np.ndarray:
    """The rank of every slice (its track's, explorer.model.ranks; NO_RANK where unknown or no `tracks`)."""
    track = slices.column("track_id").to_numpy().astype(I64)
    if tracks is None or not len(track):
        return np.full(len(track), NO_RANK, I64)
    ids = tracks.column("track_id").to_numpy().astype(I64)
    of_track = np.full(max(int(ids.max(initial=-1)), int(track.max(initial=-1))) + 1, NO_RANK, I64)
    of_track[ids] = track_ranks(tracks)
    out: np.ndarray = of_track[track]
    return out


def compute_steps(slices: pa.Table, start_ns: int, end_ns: int, annotation: str = DEFAULT_STEP_ANNOTATION,
                  tracks: pa.Table | None = None) -> StepsResult:
    """Steps are the framework-lane slices whose name starts with `annotation`; on a run of two or more
    ranks (`tracks` say whose), one row per (rank, step) counting that rank's device executions only,
    rows by rank then start, else by start (`rank` None). Times relative to `start_ns`. `slowest` is the
    index of the longest row (the first of equals), `slowest_by_rank` each rank's longest row."""
    check_annotation(annotation)
    names = pc.fill_null(slices.column("name"), "")
    is_step = pc.and_(pc.equal(slices.column("lane"), Lane.FRAMEWORK), pc.starts_with(names, annotation))
    idx = np.flatnonzero(np.asarray(pc.fill_null(is_step, False).to_numpy(zero_copy_only=False), bool))
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    end = ts + slices.column("dur_ns").to_numpy().astype(I64)
    ranks = slice_ranks(slices, tracks)
    multi = len({int(r) for r in ranks[idx].tolist()} | {int(r) for r in ranks[_device_rows(slices)].tolist()}
                - {NO_RANK}) > 1
    if not multi:
        ranks = np.full(len(ts), NO_RANK, I64)
    idx = idx[np.lexsort((end[idx], ts[idx], ranks[idx]))][:MAX_STEPS]
    if not len(idx):
        return {"annotation": annotation, "count": 0, "steps": [], "slowest": None, "slowest_by_rank": [],
                "ranks": []}
    shares = _part_shares(slices, ranks, ts, end, idx)
    span = end_ns - start_ns
    step_names = names.take(pa.array(idx, pa.int64())).to_pylist()
    rows = [_step_row(str(step_names[k]), None if ranks[i] == NO_RANK else int(ranks[i]), int(ts[i]), int(end[i]),
                      {p: int(v[k]) for p, v in shares.items()}, start_ns, span) for k, i in enumerate(idx.tolist())]
    by_rank: dict[int | None, int] = {}
    for k, row in enumerate(rows):
        best = by_rank.get(row["rank"])
        if best is None or row["dur_ns"] > rows[best]["dur_ns"]:
            by_rank[row["rank"]] = k
    slowest = max(range(len(rows)), key=lambda k: (rows[k]["dur_ns"], -k))
    return {"annotation": annotation, "count": len(rows), "steps": rows, "slowest": slowest,
            "slowest_by_rank": list(by_rank.values()), "ranks": [r for r in by_rank if r is not None]}


def _device_rows(slices: pa.Table) -> np.ndarray:
    return np.flatnonzero(slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool))


def _part_shares(slices: pa.Table, ranks: np.ndarray, ts: np.ndarray, end: np.ndarray,
                 steps: np.ndarray) -> dict[str, np.ndarray]:
    """Per step slice, the ns of each part in its window: the union of its and the higher-priority parts'
    executions of the step's rank inside the window minus the union of the higher-priority parts alone
    (STEP_PARTS order)."""
    dev = _device_rows(slices)
    take = pa.array(dev, pa.int64())
    cats = categorize(slices.column("name").take(take).combine_chunks(), slices.column("cat").take(take).combine_chunks())
    order = {name: k for k, name in enumerate(STEP_PARTS)}
    level = np.asarray([order[part_of(str(c))] for c in cats.to_pylist()], dtype=np.int8)
    shares = {part: np.zeros(len(steps), I64) for part in STEP_PARTS}
    for rank in np.unique(ranks[steps]).tolist():
        at = np.flatnonzero(ranks[steps] == rank)
        lo, hi = ts[steps[at]], end[steps[at]]
        mine = ranks[dev] == rank
        below = np.zeros(len(at), I64)
        for k, part in enumerate(STEP_PARTS):
            upto = dev[mine & (level <= k)]
            covered = covered_between(*union_segments(ts[upto], end[upto]), lo, hi)
            shares[part][at] = covered - below
            below = covered
    return shares


def _step_row(name: str, rank: int | None, lo: int, hi: int, shares: dict[str, int], origin: int,
              span: int) -> StepRow:
    dur = hi - lo
    covered = sum(shares.values())
    return {"name": name, "rank": rank, "start": lo - origin, "end": hi - origin, "dur_ns": dur, "busy_ns": covered,
            "busy_pct": 100.0 * covered / dur if dur else 0.0, "compute_ns": shares["compute"],
            "communication_ns": shares["communication"], "memcpy_ns": shares["memcpy"],
            "memset_ns": shares["memset"], "other_ns": shares["other"], "idle_ns": dur - covered,
            "timeline": timeline_window(lo - origin, hi - origin, span)}
