"""A run cut down to some of its ranks, as a smaller run of its own (slices renumbered, links into other ranks
cut), so every per-run computation works on it unchanged and equals the run of those ranks' files alone.
Parsing `rank=` lives here too, so that every table reads it the same way."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.errors import BadRequest
from explorer.model.ranks import NO_RANK, track_ranks

MAX_RANKS_IN_FILTER = 4096


@dataclass
class RankSlices:
    """Slices, tracks and flows of the chosen ranks; `kept[i]` is the original slice id of row i."""

    slices: pa.Table
    tracks: pa.Table
    flows: pa.Table
    kept: np.ndarray


def parse_ranks(text: str | None) -> tuple[int, ...] | None:
    """`rank=0,3` -> (0, 3), sorted and unique; None or "" -> None (every rank). Anything else is a
    BadRequest naming the bad part."""
    if text is None or not text.strip():
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or len(part) > 9:
            raise BadRequest(f"rank must be a comma-separated list of rank numbers, not {part!r}")
        out.add(int(part))
    if len(out) > MAX_RANKS_IN_FILTER:
        raise BadRequest(f"rank lists at most {MAX_RANKS_IN_FILTER} ranks")
    return tuple(sorted(out))


def rank_key(ranks: tuple[int, ...] | None) -> str:
    """A memo key suffix for a rank filter ("" for every rank)."""
    return "" if ranks is None else ":rank=" + ",".join(map(str, ranks))


def check_ranks(ranks: tuple[int, ...], present: list[int]) -> None:
    """A rank filter naming a rank the run does not have is a bad request (not an empty table)."""
    missing = [r for r in ranks if r not in set(present)]
    if missing:
        have = ", ".join(map(str, present)) or "none (the run has no rank information)"
        raise BadRequest(f"no rank {', '.join(map(str, missing))} in this run; ranks: {have}")


def rank_track_ids(tracks: pa.Table, ranks: tuple[int, ...]) -> np.ndarray:
    """The track ids of the chosen ranks."""
    of_track = track_ranks(tracks)
    ids = tracks.column("track_id").to_numpy().astype(np.int64)
    keep: np.ndarray = ids[np.isin(of_track, np.asarray(ranks, dtype=np.int64)) & (of_track != NO_RANK)]
    return keep


def restrict_to_ranks(slices: pa.Table, tracks: pa.Table, flows: pa.Table | None,
                      ranks: tuple[int, ...]) -> RankSlices:
    """The slices (any subset of the slice columns, `slice_id` optional), tracks and flows of `ranks`."""
    ids = rank_track_ids(tracks, ranks)
    kept = np.flatnonzero(np.isin(slices.column("track_id").to_numpy(), ids))
    new_pos = np.full(slices.num_rows, -1, dtype=np.int64)
    new_pos[kept] = np.arange(len(kept), dtype=np.int64)
    sub = slices.take(pa.array(kept, pa.int64()))
    for name in ("parent_id", "op_id"):
        if name in sub.column_names:
            sub = sub.set_column(sub.schema.get_field_index(name), name, pa.array(_remap(sub.column(name), new_pos)))
    if "slice_id" in sub.column_names:
        sub = sub.set_column(sub.schema.get_field_index("slice_id"), "slice_id",
                             pa.array(np.arange(len(kept), dtype=np.int64)))
    sub_tracks = tracks.filter(pa.array(np.isin(tracks.column("track_id").to_numpy(), ids)))
    sub_flows = flows if flows is not None else pa.table({"from_slice": pa.array([], pa.int64()),
                                                         "to_slice": pa.array([], pa.int64())})
    if sub_flows.num_rows:
        a = _remap(sub_flows.column("from_slice"), new_pos)
        b = _remap(sub_flows.column("to_slice"), new_pos)
        both = (a >= 0) & (b >= 0)
        sub_flows = sub_flows.filter(pa.array(both))
        sub_flows = sub_flows.set_column(sub_flows.schema.get_field_index("from_slice"), "from_slice",
                                         pa.array(a[both]))
        sub_flows = sub_flows.set_column(sub_flows.schema.get_field_index("to_slice"), "to_slice",
                                         pa.array(b[both]))
    return RankSlices(sub, sub_tracks, sub_flows, kept)


def _remap(column: pa.ChunkedArray | pa.Array, new_pos: np.ndarray) -> np.ndarray:
    old = np.asarray(pc.fill_null(column, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    out = np.full(len(old), -1, dtype=np.int64)
    ok = (old >= 0) & (old < len(new_pos))
    out[ok] = new_pos[old[ok]]
    return out
