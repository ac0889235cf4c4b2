"""Details of a device slice (an instruction, DMA packet or collective of a Neuron device profile): its row's
fields, its dependencies from `Flow`, the profile it belongs to; the link from an `nc_exec_running` slice to
its device profile; and the device Summary of every profile a timeline range touches. No I/O, no formatting.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.device.align import compute_alignment
from explorer.analysis.device.summary import compute_device_summary
from explorer.analysis.device.tracks import SLICE_TABLES, DeviceTimeline, device_slice_arrays
from explorer.model.lanes import Lane

MAX_DEPENDENCIES = 16  # per direction, in the details' chain
MAX_SAFE_INT = 2**53 - 1  # the largest integer a float64 (a browser's JSON number) holds exactly


def build_device_event(dt: DeviceTimeline, slice_id: int, origin_ns: int) -> dict[str, Any] | None:
    """The details panel's object for one device slice (EventDetail shape), None for an unknown id. Args are
    the row's non-null fields with the export's own names (opcode, operands, engine, bir/hlo names, layer,
    bytes, FLOPs, `evt_wait_time_ns`, source location, ...); integers beyond 2**53 (epoch ns) as decimal text."""
    cols = device_slice_arrays(dt)
    pos = slice_id - dt.first_slice_id
    if not 0 <= pos < len(cols["ts"]):
        return None
    profile = dt.profiles[int(cols["source_profile"][pos])]
    table = SLICE_TABLES[int(cols["source_table"][pos])]
    row = dt.tables[profile][table].slice(int(cols["source_row"][pos]), 1).to_pylist()[0]
    args = {k: _exact(v) for k, v in row.items() if v is not None}
    event = _brief(dt, cols, pos, origin_ns)
    event.update({"cat": table, "ts_ns": int(cols["ts"][pos]), "depth": 0, "args": args,
                  "device_profile": profile})
    return {"event": event, "parents": [], "children": {"count": 0, "top": []},
            "chain": _dependency_chain(dt, cols, slice_id, origin_ns)}


def _exact(value: Any) -> Any:
    """An integer a JSON reader may round (beyond 2**53: epoch ns) as its decimal text, so that a browser
    shows it exactly; everything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INT:
        return str(value)
    return value


def _brief(dt: DeviceTimeline, cols: dict[str, np.ndarray], pos: int, origin_ns: int) -> dict[str, Any]:
    return {"slice_id": dt.first_slice_id + pos, "track_id": int(cols["track"][pos]), "lane": str(Lane.HARDWARE),
            "name": dt.names[int(cols["name"][pos])], "ts_rel_ns": int(cols["ts"][pos]) - origin_ns,
            "dur_ns": int(cols["dur"][pos])}


def _dependency_chain(dt: DeviceTimeline, cols: dict[str, np.ndarray], slice_id: int,
                      origin_ns: int) -> list[dict[str, Any]]:
    """What the slice waits for (`Flow` in_id -> it), itself, what waits for it; time order per side, with the
    gap between consecutive starts as in the cross-lane chain."""
    f_from, f_to = dt.flows
    before = np.unique(f_from[f_to == slice_id])[:MAX_DEPENDENCIES].tolist()
    after = np.unique(f_to[f_from == slice_id])[:MAX_DEPENDENCIES].tolist()
    ts = cols["ts"]
    links = ([(s, "depends on") for s in sorted(before, key=lambda s: int(ts[s - dt.first_slice_id]))]
             + [(slice_id, "self")]
             + [(s, "dependent") for s in sorted(after, key=lambda s: int(ts[s - dt.first_slice_id]))])
    out: list[dict[str, Any]] = []
    prev: int | None = None
    for s, relation in links:
        item = _brief(dt, cols, s - dt.first_slice_id, origin_ns)
        item["relation"] = relation
        item["gap_ns"] = None if prev is None else item["ts_rel_ns"] - prev
        prev = item["ts_rel_ns"]
        out.append(item)
    return out


def device_profile_link(profiles: pa.Table, slice_id: int, origin_ns: int,
                        exec_span: tuple[int, int] | None = None) -> dict[str, Any] | None:
    """The device profile an `nc_exec_running` slice executed (DeviceProfileList link), None if none: its id,
    name and span (relative ns) for "open device profile", and with the slice's absolute [start, end) how the
    profile sits on the system axis (`alignment`, explorer.analysis.device.align)."""
    linked = profiles.filter(pc.equal(profiles.column("system_slice_id"), slice_id)).to_pylist()
    if not linked:
        return None
    p = linked[0]
    align = compute_alignment(int(p["start_ns"]), int(p["end_ns"]), *(exec_span or (None, None)))
    shift = align["shift_ns"]  # its tracks' span on the timeline (the host clock)
    out = {"profile_id": p["profile_id"], "name": p["name"], "nc_id": p["nc_id"],
           "start_ns": int(p["start_ns"]) + shift - origin_ns, "end_ns": int(p["end_ns"]) + shift - origin_ns}
    if exec_span is not None:
        out["alignment"] = align
    return out


def compute_range_device_summaries(dt: DeviceTimeline, profiles: pa.Table, start_ns: int, end_ns: int,
                                   origin_ns: int) -> list[dict[str, Any]]:
    """The device Summary (compute_device_summary, the published definitions) of [start_ns, end_ns)
    (relative ns on the timeline) cut to each profile's span there (its times shifted by its alignment), for
    every profile the range overlaps; times in the result are relative ns, the window each summary covers."""
    a, b = start_ns + origin_ns, end_ns + origin_ns
    out = []
    for p in profiles.to_pylist():
        shift = dt.alignments[p["profile_id"]]["shift_ns"] if p["profile_id"] in dt.alignments else 0
        lo, hi = max(a, int(p["start_ns"]) + shift), min(b, int(p["end_ns"]) + shift)
        if hi <= lo:
            continue
        summary = compute_device_summary(dt.tables[p["profile_id"]], lo - shift, hi - shift)
        out.append({"profile": p["profile_id"], "name": p["name"], "start_ns": lo - origin_ns,
                    "end_ns": hi - origin_ns, "metrics": summary.metrics})
    return out
