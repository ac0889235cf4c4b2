"""Step view: one row per training step (`ProfilerStep#N`, or any host annotation chosen by name prefix)
with its step time and what the devices did in it, like the TensorBoard profiler's overview.

Device time is interval arithmetic in integer ns over every device execution (all device lanes
together) clipped to the step; no formatting here (percent and units are made by templates and charts).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.gap_evidence import timeline_window
from explorer.analysis.intervals import covered_between, union_segments
from explorer.analysis.kernels import categorize
from explorer.errors import BadRequest
from explorer.model.lanes import Lane
from explorer.model.shapes import StepRow, StepsResult

I64 = np.int64
DEFAULT_STEP_ANNOTATION = "ProfilerStep#"
MAX_ANNOTATION_CHARS = 200
MAX_STEPS = 10_000  # steps listed at most (the slowest is found over all of them)
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


def compute_steps(slices: pa.Table, start_ns: int, end_ns: int,
                  annotation: str = DEFAULT_STEP_ANNOTATION) -> StepsResult:
    """Steps are the framework-lane slices whose name starts with `annotation`, by start time; times
    relative to `start_ns`. `slowest` is the index of the longest step (the first of equals)."""
    check_annotation(annotation)
    names = pc.fill_null(slices.column("name"), "")
    is_step = pc.and_(pc.equal(slices.column("lane"), Lane.FRAMEWORK), pc.starts_with(names, annotation))
    idx = np.flatnonzero(np.asarray(pc.fill_null(is_step, False).to_numpy(zero_copy_only=False), bool))
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    end = ts + slices.column("dur_ns").to_numpy().astype(I64)
    idx = idx[np.lexsort((end[idx], ts[idx]))][:MAX_STEPS]
    if not len(idx):
        return {"annotation": annotation, "count": 0, "steps": [], "slowest": None}
    lo, hi = ts[idx], end[idx]
    shares = _part_shares(slices, ts, end, lo, hi)
    span = end_ns - start_ns
    step_names = names.take(pa.array(idx, pa.int64())).to_pylist()
    rows = [_step_row(str(step_names[k]), int(lo[k]), int(hi[k]), {p: int(v[k]) for p, v in shares.items()},
                      start_ns, span) for k in range(len(idx))]
    slowest = max(range(len(rows)), key=lambda k: (rows[k]["dur_ns"], -k)) if rows else None
    return {"annotation": annotation, "count": len(rows), "steps": rows, "slowest": slowest}


def _part_shares(slices: pa.Table, ts: np.ndarray, end: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> dict[str, np.ndarray]:
    """Per step window [lo, hi), the ns of each part: the union of its and the higher-priority parts'
    executions inside the window minus the union of the higher-priority parts alone (STEP_PARTS order)."""
    dev = np.flatnonzero(slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool))
    take = pa.array(dev, pa.int64())
    cats = categorize(slices.column("name").take(take).combine_chunks(), slices.column("cat").take(take).combine_chunks())
    rank = {name: k for k, name in enumerate(STEP_PARTS)}
    level = np.asarray([rank[part_of(str(c))] for c in cats.to_pylist()], dtype=np.int8)
    shares: dict[str, np.ndarray] = {}
    below = np.zeros(len(lo), I64)
    for k, part in enumerate(STEP_PARTS):
        upto = dev[level <= k]
        covered = covered_between(*union_segments(ts[upto], end[upto]), lo, hi)
        shares[part] = covered - below
        below = covered
    return shares


def _step_row(name: str, lo: int, hi: int, shares: dict[str, int], origin: int, span: int) -> StepRow:
    dur = hi - lo
    covered = sum(shares.values())
    return {"name": name, "start": lo - origin, "end": hi - origin, "dur_ns": dur, "busy_ns": covered,
            "busy_pct": 100.0 * covered / dur if dur else 0.0, "compute_ns": shares["compute"],
            "communication_ns": shares["communication"], "memcpy_ns": shares["memcpy"],
            "memset_ns": shares["memset"], "other_ns": shares["other"], "idle_ns": dur - covered,
            "timeline": timeline_window(lo - origin, hi - origin, span)}
