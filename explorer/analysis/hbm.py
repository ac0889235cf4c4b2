"""Neuron device memory (HBM) by usage type, from the system profile's HBM counter series (`<where> total [bytes]`
and `<where> <type> [bytes]`, explorer/ingest/neuron/parquet_profile.py): per HBM, the peak of the total, its time, and each
type's bytes then. Pure: series in, ints out."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
from typing_extensions import TypedDict

from explorer.analysis.memory import thin_indices

HBM_SERIES = re.compile(r"^(?P<where>.*\bHBM \S+) (?P<type>.+) \[bytes\]$")
TOTAL = "total"


class HbmType(TypedDict):
    type: str
    bytes: int


class HbmUsage(TypedDict):
    where: str  # "device 0 HBM 1"
    peak_bytes: int  # the highest total
    peak_ns: int  # its first time (ns from the run's start)
    at_peak: list[HbmType]  # each type's latest value at or before that time, biggest first
    ts_ns: list[int]  # the total's samples (thinned)
    total: list[int]
    types: list[str]
    series: list[list[int]]  # per type, its latest value at each ts_ns


def is_hbm_series(label: str) -> bool:
    return HBM_SERIES.match(label) is not None


def compute_hbm(series: Mapping[str, tuple[np.ndarray, np.ndarray]], points: int = 1500) -> list[HbmUsage]:
    """`series`: label -> (ts_ns from the run's start, value) in time order, for the HBM labels."""
    by_where: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for label, pts in series.items():
        if (m := HBM_SERIES.match(label)) is not None:
            by_where.setdefault(m["where"], {})[m["type"]] = pts
    out: list[HbmUsage] = []
    for where in sorted(by_where):
        kinds = by_where[where]
        if TOTAL not in kinds or not len(kinds[TOTAL][0]):
            continue
        ts, total = kinds[TOTAL][0], np.rint(kinds[TOTAL][1]).astype(np.int64)
        at = int(np.argmax(total))
        types = sorted(k for k in kinds if k != TOTAL)
        values = {k: _latest(kinds[k], ts) for k in types}
        keep = thin_indices(total, points)
        out.append(HbmUsage(
            where=where, peak_bytes=int(total[at]), peak_ns=int(ts[at]),
            at_peak=sorted((HbmType(type=k, bytes=int(values[k][at])) for k in types if values[k][at]),
                           key=lambda r: -r["bytes"]),
            ts_ns=ts[keep].tolist(), total=total[keep].tolist(), types=types,
            series=[values[k][keep].tolist() for k in types]))
    return out


def _latest(pts: tuple[np.ndarray, np.ndarray], at: np.ndarray) -> np.ndarray:
    """The series' latest value at or before each time of `at` (0 before its first sample)."""
    ts, value = pts
    pos = np.searchsorted(ts, at, side="right") - 1
    out = np.where(pos >= 0, np.rint(value[np.maximum(pos, 0)]) if len(value) else 0, 0)
    return np.asarray(out, dtype=np.int64)
