"""Memory by category over time from `export_memory_timeline` output (the memory_categories table): parameters,
optimizer state, inputs, temporaries, activations, gradients, autograd detail, unknown — replayed in time order
(what was held before the profile first), the peak of the total and each category's bytes at it. Pure."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from typing_extensions import TypedDict

from explorer.analysis.memory import thin_indices


class CategoryBytes(TypedDict):
    category: str
    bytes: int


class CategoryTimeline(TypedDict):
    changes: int
    categories: list[str]  # those that ever hold bytes, in the file's category order
    ts_ns: list[int]  # from `origin_ns` (the held-before-the-profile changes sit at the first timed change)
    total: list[int]
    stacked: list[list[int]]  # per category, its bytes at each ts_ns; together they sum to `total`
    peak_bytes: int
    peak_ns: int
    peak_by_category: list[CategoryBytes]  # biggest first; sums to peak_bytes


def compute_categories(table: pa.Table, origin_ns: int | None, order: tuple[str, ...],
                       points: int = 1500) -> CategoryTimeline | None:
    """The category timeline; `origin_ns` None: times from the first timed change. None when the table is empty."""
    if not table.num_rows:
        return None
    ts = table.column("ts_ns").to_numpy()
    timed = ts[ts >= 0]
    first = int(timed.min()) if len(timed) else 0
    ts = np.where(ts >= 0, ts, first)  # (held before the profile: there from the start)
    seq = np.arange(len(ts))
    idx = np.lexsort((seq, ts))  # time order, file order on ties (a stable sort)
    names = table.column("category").to_pylist()
    cats = [c for c in order if c in set(names)] + sorted(set(names) - set(order))
    col = {c: k for k, c in enumerate(cats)}
    delta = np.zeros((len(cats), len(ts)), dtype=np.int64)
    nbytes = table.column("bytes").to_numpy()
    for pos, i in enumerate(idx.tolist()):
        delta[col[names[i]], pos] = nbytes[i]
    held = np.cumsum(delta, axis=1)
    total = held.sum(axis=0)
    # one point per distinct time: the state after every change at that time
    t_sorted = ts[idx]
    last = np.flatnonzero(np.r_[t_sorted[1:] != t_sorted[:-1], True])
    total_t, held_t = total[last], held[:, last]
    at = int(np.argmax(total_t))
    keep = last.copy()
    thinned = thin_indices(total_t, points)
    base = first if origin_ns is None else origin_ns
    peak_by = sorted((CategoryBytes(category=c, bytes=int(held_t[k, at])) for k, c in enumerate(cats)
                      if held_t[k, at]), key=lambda r: -r["bytes"])
    return CategoryTimeline(
        changes=len(ts), categories=cats, ts_ns=(t_sorted[keep][thinned] - base).tolist(),
        total=total_t[thinned].tolist(), stacked=[row[thinned].tolist() for row in held_t],
        peak_bytes=int(total_t[at]), peak_ns=int(t_sorted[last[at]]) - base, peak_by_category=peak_by)
