"""Columnar building blocks of TraceBuilder: slice chunks, vectorized flow binding, id lookups.

Bulk parsers hand whole columns (numpy / Arrow) to the builder; these helpers keep that path
free of per-event Python work. Row-at-a-time parsers end up here too, as one more chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.ingest.chrome.spill import Segment, SpilledArgs
from explorer.model.lanes import LANE_ORDER, Lane, rule_for

NONE = -1  # "no value" in integer id columns; nullable columns use Arrow nulls instead
ROW_FLOW_CODES = 1 << 48  # row-wise flow codes (TraceBuilder.flow_code) live above every block handed to bulk parsers


# Slice names, categories and shapes are held as codes into each chunk's distinct values from the parse on (a
# name repeats across a trace's slices: the 10M-event file's raw names, categories and shapes take ~300 MB as
# text); args, unique per slice, stay text.
TEXT_CODES = pa.dictionary(pa.int32(), pa.string())
CODED_FIELDS = ("name", "cat", "shapes")


def as_codes(texts: pa.Array) -> pa.DictionaryArray:
    """A text column as TEXT_CODES (one encoded already is kept as it is)."""
    if pa.types.is_dictionary(texts.type):
        return texts if texts.type == TEXT_CODES else texts.cast(TEXT_CODES)
    coded: pa.DictionaryArray = pc.dictionary_encode(texts.cast(pa.string()))
    return coded


@dataclass
class SliceChunk:
    """A batch of raw slices: one value per slice in every column."""

    thread: np.ndarray  # int64 raw thread index
    lane: np.ndarray  # int64 LANE_ORDER value
    ts: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns
    corr: np.ndarray  # int64, -1 none
    ext: np.ndarray  # int64, -1 none
    is_op: np.ndarray  # bool
    devtime: np.ndarray  # bool
    name: pa.Array  # TEXT_CODES (as_codes)
    cat: pa.Array  # TEXT_CODES
    args: Segment  # string (JSON object text), held or spilled to disk (explorer.ingest.chrome.spill)
    shapes: pa.Array  # TEXT_CODES

    def __post_init__(self) -> None:
        self.name, self.cat, self.shapes = as_codes(self.name), as_codes(self.cat), as_codes(self.shapes)

    def __len__(self) -> int:
        return len(self.ts)


def rule_columns(cat: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lane, is_op, device_time) per slice from its category, via the lane rule table."""
    if isinstance(cat, pa.ChunkedArray):
        cat = cat.combine_chunks()
    encoded = pc.dictionary_encode(cat)
    cats = encoded.dictionary.to_pylist()
    idx = encoded.indices.to_numpy(zero_copy_only=False)
    rules = [rule_for(c or "") for c in cats]
    lane = np.asarray([LANE_ORDER[r.lane] for r in rules] or [0], dtype=np.int64)[idx] if len(idx) else \
        np.zeros(0, np.int64)
    is_op = np.asarray([r.is_op for r in rules] or [False], dtype=bool)[idx] if len(idx) else np.zeros(0, bool)
    dev = np.asarray([r.device_time for r in rules] or [False], dtype=bool)[idx] if len(idx) else \
        np.zeros(0, bool)
    return lane, is_op, dev


@dataclass
class SliceColumns:
    """All raw slices of a build, concatenated."""

    thread: np.ndarray
    lane: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    corr: np.ndarray
    ext: np.ndarray
    is_op: np.ndarray
    devtime: np.ndarray
    name: pa.ChunkedArray  # TEXT_CODES, each chunk with its own values
    cat: pa.ChunkedArray  # TEXT_CODES
    args: pa.ChunkedArray | list[Segment]  # a list when some chunk's args are on disk
    shapes: pa.ChunkedArray  # TEXT_CODES


def concat_chunks(chunks: list[SliceChunk]) -> SliceColumns:
    def num(attr: str, dtype: type) -> np.ndarray:
        parts = [getattr(c, attr) for c in chunks]
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

    def text(attr: str) -> pa.ChunkedArray:
        # kept chunked: take() on it later copies once, instead of a concatenation and then a take
        parts = [getattr(c, attr) for c in chunks if len(c)]
        return pa.chunked_array([p.cast(pa.string()) for p in parts], pa.string())

    def codes(attr: str) -> pa.ChunkedArray:
        return pa.chunked_array([getattr(c, attr) for c in chunks if len(c)], TEXT_CODES)

    segments = [c.args for c in chunks if len(c)]
    spilled = any(isinstance(a, SpilledArgs) for a in segments)
    return SliceColumns(
        thread=num("thread", np.int64), lane=num("lane", np.int64), ts=num("ts", np.int64), dur=num("dur", np.int64),
        corr=num("corr", np.int64), ext=num("ext", np.int64), is_op=num("is_op", bool), devtime=num("devtime", bool),
        name=codes("name"), cat=codes("cat"), args=segments if spilled else text("args"), shapes=codes("shapes"),
    )


@dataclass
class FlowPoints:
    """Flow steps (Chrome s/t/f): which flow they belong to, where and when they happen."""

    key: list[np.ndarray] = field(default_factory=list)  # int64 flow key code (same flow -> same code)
    kind: list[np.ndarray] = field(default_factory=list)  # int8 index into KINDS
    thread: list[np.ndarray] = field(default_factory=list)
    ts: list[np.ndarray] = field(default_factory=list)
    enclosing: list[np.ndarray] = field(default_factory=list)  # bind to the enclosing slice, else the next

    def add(self, key: np.ndarray, kind: np.ndarray, thread: np.ndarray, ts: np.ndarray,
            enclosing: np.ndarray) -> None:
        self.key.append(key.astype(np.int64))
        self.kind.append(kind.astype(np.int8))
        self.thread.append(thread.astype(np.int64))
        self.ts.append(ts.astype(np.int64))
        self.enclosing.append(enclosing.astype(bool))

    def __len__(self) -> int:
        return sum(len(k) for k in self.key)


def bind_points(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, parent: np.ndarray,
                p_thread: np.ndarray, p_ts: np.ndarray, p_enclosing: np.ndarray) -> np.ndarray:
    """Chrome flow binding, vectorized: the innermost slice on the point's thread that covers its
    time (enclosing), else the first slice starting at or after it. -1 where nothing binds."""
    out = np.full(len(p_ts), NONE, dtype=np.int64)
    if len(ts) == 0 or len(p_ts) == 0:
        return out
    order = np.lexsort((-dur, ts, thread))
    # each thread's run in `order`, from the threads' counts: no sorted copy of the thread and time columns
    bounds = np.zeros(int(max(thread.max(), p_thread.max())) + 2, dtype=np.int64)
    np.cumsum(np.bincount(thread, minlength=len(bounds) - 1), out=bounds[1:])
    for t in np.unique(p_thread):
        lo, hi = bounds[t], bounds[t + 1]
        pts = np.nonzero(p_thread == t)[0]
        if lo == hi:
            continue
        seg_ts = ts[order[lo:hi]]
        # innermost candidate: the last slice starting at or before the point
        j = np.searchsorted(seg_ts, p_ts[pts], side="right") - 1
        cand = np.where(j >= 0, order[lo + np.maximum(j, 0)], NONE)
        for _ in range(256):  # walk up to the nearest ancestor that still covers the point
            bad = (cand >= 0) & (ts[np.maximum(cand, 0)] + dur[np.maximum(cand, 0)] < p_ts[pts])
            if not bad.any():
                break
            cand[bad] = parent[cand[bad]]
        nxt_j = np.searchsorted(seg_ts, p_ts[pts], side="left")
        nxt = np.where(nxt_j < hi - lo, order[lo + np.minimum(nxt_j, hi - lo - 1)], NONE)
        # enclosing steps take the covering slice (else the next one); others the next slice
        out[pts] = np.where(p_enclosing[pts] & (cand >= 0), cand, nxt)
    return out


def pair_steps(key: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Consecutive steps of each flow, in time order: (from point, to point) index pairs."""
    if len(key) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((np.arange(len(key)), ts, key))
    same = key[order][1:] == key[order][:-1]
    return order[:-1][same], order[1:][same]


def lookup(keys_src: np.ndarray, keys_val: np.ndarray, targets: np.ndarray,
           q_src: np.ndarray, q_val: np.ndarray) -> np.ndarray:
    """For each query (src, value), the target of the first key with that (src, value); -1 if none."""
    out = np.full(len(q_val), NONE, dtype=np.int64)
    if len(keys_val) == 0 or len(q_val) == 0:
        return out
    order = np.lexsort((keys_val, keys_src))
    ks, kv = keys_src[order], keys_val[order]
    # combined search: first by src (few values), then by value within the src segment
    for s in np.unique(q_src):
        lo, hi = np.searchsorted(ks, s, "left"), np.searchsorted(ks, s, "right")
        if lo == hi:
            continue
        q = np.nonzero(q_src == s)[0]
        pos = np.searchsorted(kv[lo:hi], q_val[q], "left")
        ok = pos < hi - lo
        hit = np.zeros(len(q), bool)
        hit[ok] = kv[lo:hi][pos[ok]] == q_val[q][ok]
        out[q[hit]] = targets[order[lo + pos[hit]]]
    return out


KINDS = ("execute", "fwdbwd", "generic", "launch")


def lane_values() -> np.ndarray:
    return np.asarray([lv.value for lv in Lane], dtype=object)
