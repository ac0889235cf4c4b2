"""Search a whole run: substring (case-insensitive) or RE2 regex over slice names, optionally args.

Names are matched once per distinct name (the dictionary), then mapped to rows, so a search over a
million slices costs one pass over integer codes. Regexes run on Arrow's RE2 engine: linear time,
no catastrophic backtracking. Returns the count and the first matches in time order. No I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.timeline.index import TimelineIndex
from explorer.errors import BadRequest
from explorer.model.lanes import Lane

MAX_QUERY_CHARS = 500


def match_strings(values: pa.Array | pa.ChunkedArray, q: str, regex: bool) -> np.ndarray:
    """Boolean mask of `values` matching `q`; raises BadRequest for an invalid regex."""
    if len(q) > MAX_QUERY_CHARS:
        raise BadRequest(f"search text is longer than {MAX_QUERY_CHARS} characters")
    try:
        hit = (pc.match_substring_regex(values, q) if regex
               else pc.match_substring(values, q, ignore_case=True))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise BadRequest(f"invalid regular expression: {exc}") from None
    return np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)


def compute_search(ix: TimelineIndex, q: str, regex: bool = False, limit: int = 100,
                   args: pa.ChunkedArray | None = None) -> dict[str, Any]:
    """Matches of `q` in names (and `args`, a column by slice_id, when given), earliest first."""
    if not q:
        raise BadRequest("empty search")
    name_hit = match_strings(pa.array(ix.names, pa.string()), q, regex)
    mask = name_hit[ix.name] if len(ix.name) else np.zeros(0, bool)
    if args is not None and len(mask):
        mask = mask | match_strings(args, q, regex)[ix.slice_id]
    pos = np.flatnonzero(mask)
    count = len(pos)
    if count > limit:
        part = np.argpartition(ix.ts[pos], limit - 1)[:limit] if limit > 0 else np.zeros(0, np.int64)
        pos = pos[part]
    pos = pos[np.lexsort((ix.slice_id[pos], ix.ts[pos]))]
    tracks = ix.slice_track[ix.slice_id[pos]].tolist()
    matches = [{"slice_id": sid, "name": ix.names[code], "lane": ix.track_lane.get(tid, Lane.OTHER),
                "track_id": tid, "ts": ts, "dur": dur}
               for sid, code, tid, ts, dur in zip(ix.slice_id[pos].tolist(), ix.name[pos].tolist(), tracks,
                                                  ix.ts[pos].tolist(), ix.dur[pos].tolist(), strict=True)]
    return {"count": count, "matches": matches}
