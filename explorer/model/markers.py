"""Profiler bookkeeping markers: the declarative table of events a profiler writes about its own recording
window. They stay in the data (drawn on the timeline) but never define a run's span, a busy % denominator
or the timeline's default window. Each row is also a test row (tests/model/test_markers.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LIBKINETO = "pytorch/kineto libkineto/src/output_json.cpp"


@dataclass(frozen=True)
class MarkerRule:
    """Events of `kind` ("slice" or "instant") whose category (exact, case-insensitive; "" any) and name
    (exact `name`, or starting with `prefix`; both "" any) match are profiler bookkeeping."""

    kind: str
    category: str = ""
    name: str = ""
    prefix: str = ""
    source: str = ""


MARKER_RULES: tuple[MarkerRule, ...] = (
    # ChromeTraceLogger::handleTraceSpan: the recording window as an X event of cat "Trace" on pid "Spans"
    # ("PyTorch Profiler (0)", "__cupti_profiler__ (-1)", "MTIA Activity Trace (-1)", ...); it starts at the
    # profiler's start, before the first event, and covers the warm-up
    MarkerRule("slice", category="trace", source=f"{_LIBKINETO} handleTraceSpan"),
    # handleTraceSpan also writes a global instant "Iteration Start: <span name>" at the window's start
    MarkerRule("instant", prefix="Iteration Start: ", source=f"{_LIBKINETO} handleTraceSpan"),
    # ChromeTraceLogger::finalizeTrace: a global instant at the end of collection, after the buffers were
    # flushed (often milliseconds past the last event)
    MarkerRule("instant", name="Record Window End", source=f"{_LIBKINETO} finalizeTrace"),
    MarkerRule("instant", name="Record Window Start", source="Kineto-shaped writers that pair it with the end"),
)


def _text(column: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    return pa.chunked_array(chunks, type=chunks[0].type if chunks else pa.string())


def _match(values: pa.Array, rule: MarkerRule, lower: bool) -> np.ndarray:
    """Which of `values` (names, or lower-cased categories when `lower`) the rule's text test accepts."""
    if lower:
        hit = pc.equal(pc.utf8_lower(values), rule.category)
    elif rule.name:
        hit = pc.equal(values, rule.name)
    else:
        hit = pc.starts_with(values, rule.prefix)
    return np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)


def _column_match(column: pa.Array | pa.ChunkedArray, rule: MarkerRule, lower: bool) -> np.ndarray:
    """_match over a column, computed once per distinct value of a dictionary-encoded one."""
    parts = []
    for chunk in _text(column).chunks:
        if isinstance(chunk, pa.DictionaryArray):
            on_dict = _match(chunk.dictionary, rule, lower)
            idx = chunk.indices.to_numpy(zero_copy_only=False)
            parts.append(on_dict[idx] if len(on_dict) else np.zeros(len(chunk), bool))
        else:
            parts.append(_match(chunk, rule, lower))
    return np.concatenate(parts) if parts else np.zeros(0, bool)


def marker_mask(kind: str, cat: pa.Array | pa.ChunkedArray, name: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """True for the events of `kind` (their `cat` and `name` columns) that a MARKER_RULES row matches."""
    n = len(cat)
    mask = np.zeros(n, bool)
    if not n:
        return mask
    for rule in MARKER_RULES:
        if rule.kind != kind:
            continue
        hit = np.ones(n, bool)
        if rule.category:
            hit &= _column_match(cat, rule, lower=True)
        if rule.name or rule.prefix:
            hit &= _column_match(name, rule, lower=False)
        mask |= hit
    return mask


def is_marker(kind: str, cat: str, name: str) -> bool:
    """marker_mask for one event."""
    return bool(marker_mask(kind, pa.array([cat], pa.string()), pa.array([name], pa.string()))[0])
