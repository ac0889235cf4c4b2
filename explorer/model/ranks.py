"""Which rank each track belongs to, the one reading every per-rank view shares: the tracks table's `rank`
column (-1: unknown), else, for runs stored before that column, the `rank N` instance label ingest gave
each file of a multi-file run."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

NO_RANK = -1
_RANK_LABEL = re.compile(r"\brank[ _-]?(\d+)\b", re.IGNORECASE)


def rank_of_label(label: str) -> int:
    """`rank 3`, `rank-3`, `rank_3` (any case) -> 3; anything else NO_RANK."""
    match = _RANK_LABEL.search(label or "")
    return int(match.group(1)) if match else NO_RANK


def track_ranks(tracks: pa.Table) -> np.ndarray:
    """The rank of every row of a tracks table (int64, NO_RANK where unknown), in row order."""
    if "rank" in tracks.column_names:
        return np.asarray(tracks.column("rank").fill_null(NO_RANK).to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.asarray([rank_of_label(s) for s in tracks.column("instance").to_pylist()], dtype=np.int64)


def rank_by_track(tracks: pa.Table) -> dict[int, int]:
    """track_id -> rank, for the tracks whose rank is known."""
    ids = tracks.column("track_id").to_pylist()
    return {int(t): int(r) for t, r in zip(ids, track_ranks(tracks).tolist(), strict=True) if r != NO_RANK}


def run_ranks(tracks: pa.Table) -> list[int]:
    """The ranks present in a run, ascending (empty for a single-process run without rank information)."""
    return sorted({int(r) for r in track_ranks(tracks).tolist() if r != NO_RANK})
