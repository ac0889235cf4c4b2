"""Timeline tracks of a run's Neuron device profiles, built at read time from the stored device tables: one
slice track per (physical core, `Instruction.timeline_track`), per DMA queue and per CC core, and counter
tracks (HBM/DMA throughput, pending DMA, throttling, SBUF/PSUM use, per-op HFU/MFU), with track and slice
ids above the run's own. Times are absolute int64 ns on the host clock (each profile shifted by its alignment,
explorer.analysis.device.align); the timeline index makes them relative. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.device.align import compute_profile_alignments
from explorer.analysis.device.rows import Tables, ints, strings
from explorer.analysis.timeline.index import TimelineIndex, build_timeline_index
from explorer.model.device_shapes import AlignmentJson
from explorer.model.lanes import Lane
from explorer.model.ranks import NO_RANK
from explorer.model.shapes import TrackRow
from explorer.model.tables import TRACKS

I64 = np.int64
# The stored tables to load per profile: those the tracks are drawn from, and those a range summary
# (explorer.analysis.device.summary) reads besides.
TRACK_TABLES = ("Instruction", "DmaPacket", "CcInstruction", "Flow", "HbmUsage", "DmaUsage", "PendingDma",
                "Throttle", "SbufUsage", "PsumUsage", "FrameworkNode", "Metadata", "Summary", "CcOp",
                "DmaPacketAggregated")
# Slice sources: the table a device slice comes from, by code (DeviceTimeline.source_table).
SLICE_TABLES = ("Instruction", "DmaPacket", "CcInstruction")
# Engine rows in the order Neuron Explorer draws them; other timeline_track values follow by name.
ENGINE_ORDER = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
# Counter tracks: (table, value column, label); Throttle and FrameworkNode are built by their own rules.
COUNTER_COLUMNS = (
    ("HbmUsage", "current_throughput", "HBM throughput [bytes/s]"),
    ("DmaUsage", "current_throughput", "DMA throughput [bytes/s]"),
    ("PendingDma", "value", "pending DMA"),
    ("SbufUsage", "avg_util_percent", "SBUF utilisation [%]"),
    ("PsumUsage", "avg_util_percent", "PSUM utilisation [%]"),
)
PER_OP = (("hfu_per_interval", "HFU per op [fraction of 1]"), ("mfu_per_interval", "MFU per op [fraction of 1]"))
DEVICE_COLOURS = {"opcode": "name", "layer": "layer"}  # colour device slices by: -> the name column used
DEPENDENCY = "dependency"  # the flow kind of a `Flow` row between two instructions
DEVICE_TRACKS = TRACKS.append(pa.field("device_profile", pa.string())).append(pa.field("group", pa.string()))


@dataclass
class DeviceTimeline:
    """Every device track of a run and what is on it. Slice i (slice id first_slice_id + i) is row
    source_row[i] of table SLICE_TABLES[source_table[i]] of profile profiles[source_profile[i]]."""

    first_slice_id: int
    first_track_id: int
    profiles: list[str]
    tables: dict[str, Tables]  # profile_id -> its tables (those of TRACK_TABLES), for details and summaries
    tracks: list[dict[str, Any]] = field(default_factory=list)  # DEVICE_TRACKS rows
    ts: list[np.ndarray] = field(default_factory=list)  # per part, concatenated by finish()
    dur: list[np.ndarray] = field(default_factory=list)
    track: list[np.ndarray] = field(default_factory=list)
    name: list[np.ndarray] = field(default_factory=list)
    layer: list[np.ndarray] = field(default_factory=list)  # name codes of the PyTorch op (colour by op)
    source_profile: list[np.ndarray] = field(default_factory=list)
    source_table: list[np.ndarray] = field(default_factory=list)
    source_row: list[np.ndarray] = field(default_factory=list)
    counter_parts: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)
    flows: tuple[np.ndarray, np.ndarray] = (np.zeros(0, I64), np.zeros(0, I64))
    profile_of_track: dict[int, str] = field(default_factory=dict)
    alignments: dict[str, AlignmentJson] = field(default_factory=dict)  # profile_id -> its shift onto the host clock
    columns: dict[str, np.ndarray] = field(default_factory=dict)  # the parts concatenated, by finish
    names: list[str] = field(default_factory=list)  # slice names; `name` columns hold codes into it
    _name_index: dict[str, int] = field(default_factory=dict)

    def name_code(self, name: str) -> int:
        if name not in self._name_index:
            self._name_index[name] = len(self.names)
            self.names.append(name)
        return self._name_index[name]


def build_device_timeline(profiles: pa.Table, tables: Mapping[str, Tables], run_tracks: pa.Table,
                          run_slices: pa.Table) -> DeviceTimeline:
    """The device tracks of every profile of a run. A profile linked to an `nc_exec_running` slice sorts
    right under that slice's track; one without sorts after every hardware track of the run."""
    first_track = int(max(run_tracks.column("track_id").to_pylist(), default=-1)) + 1
    sort_of = dict(zip(run_tracks.column("track_id").to_pylist(), run_tracks.column("sort_key").to_pylist(),
                       strict=True))
    last_sort = max(sort_of.values(), default=0) + 1
    slice_track = run_slices.column("track_id").to_numpy()
    dt = DeviceTimeline(first_slice_id=run_slices.num_rows, first_track_id=first_track, profiles=[],
                        tables=dict(tables), alignments=compute_profile_alignments(profiles, run_slices))
    flow_from: list[np.ndarray] = []
    flow_to: list[np.ndarray] = []
    for p in profiles.to_pylist():
        linked = int(p["system_slice_id"])
        sort_key = sort_of.get(int(slice_track[linked]), last_sort) if 0 <= linked < len(slice_track) else last_sort
        base = dt.first_slice_id + sum(len(x) for x in dt.ts)
        ids = _add_profile(dt, p, tables[p["profile_id"]], int(sort_key))
        a, b = _flow_pairs(tables[p["profile_id"]], ids, base)
        flow_from.append(a)
        flow_to.append(b)
    dt.flows = (np.concatenate(flow_from) if flow_from else np.zeros(0, I64),
                np.concatenate(flow_to) if flow_to else np.zeros(0, I64))
    dt.columns = {"ts": _cat(dt.ts, I64), "dur": _cat(dt.dur, I64), "track": _cat(dt.track, np.int32),
                  "name": _cat(dt.name, np.int32), "layer": _cat(dt.layer, np.int32), "source_profile": _cat(dt.source_profile, np.int32),
                  "source_table": _cat(dt.source_table, np.int8), "source_row": _cat(dt.source_row, I64)}
    dt.ts, dt.dur, dt.track, dt.name, dt.layer, dt.source_profile, dt.source_table, dt.source_row = (
        [] for _ in range(8))
    return dt


def _add_profile(dt: DeviceTimeline, p: dict[str, Any], tables: Tables, sort_key: int) -> np.ndarray:
    """Append one profile's tracks and slices, shifted by its alignment; returns its Instruction ids by slice
    position (offset from the profile's first slice), -1 for non-instruction slices."""
    code, shift = len(dt.profiles), dt.alignments[p["profile_id"]]["shift_ns"]
    dt.profiles.append(p["profile_id"])
    ident = {"lane": str(Lane.HARDWARE), "instance": p["instance_id"], "process": f"PID {p['process_id']}",
             "device": f"NC:{p['nc_id']}", "sort_key": sort_key, "device_profile": p["profile_id"]}
    head = f"{p['name']} · NC:{p['nc_id']}"
    inst_ids: list[np.ndarray] = []
    for t, src in enumerate(SLICE_TABLES):
        rows = tables.get(src)
        if rows is None or not rows.num_rows:
            continue
        start, end = ints(rows, "start_ts"), ints(rows, "end_ts")
        assert start is not None and end is not None
        names = _name_codes(dt, src, rows)
        layers = _layer_codes(dt, rows, names) if src == "Instruction" else names
        ids = ints(rows, "id") if src == "Instruction" else None
        for label, group, pos in _slice_groups(src, rows, start):
            tid = dt.first_track_id + len(dt.tracks)
            dt.tracks.append({**ident, "track_id": tid, "kind": "slice", "thread": label, "label": label,
                              "max_depth": 0, "count": len(pos), "group": f"{head} · {group}"})
            dt.profile_of_track[tid] = p["profile_id"]
            dt.ts.append(start[pos] + shift)
            dt.dur.append(np.maximum(end[pos] - start[pos], 0))
            dt.track.append(np.full(len(pos), tid, np.int32))
            dt.name.append(names[pos])
            dt.layer.append(layers[pos])
            dt.source_profile.append(np.full(len(pos), code, np.int32))
            dt.source_table.append(np.full(len(pos), t, np.int8))
            dt.source_row.append(pos)
            inst_ids.append(ids[pos] if ids is not None else np.full(len(pos), -1, I64))
    for label, ts, value in _counter_series(tables):
        tid = dt.first_track_id + len(dt.tracks)
        dt.tracks.append({**ident, "track_id": tid, "kind": "counter", "thread": label, "label": label,
                          "max_depth": 0, "count": len(ts), "group": f"{head} · counters"})
        dt.profile_of_track[tid] = p["profile_id"]
        dt.counter_parts.append((tid, ts + shift, value))
    return np.concatenate(inst_ids) if inst_ids else np.zeros(0, I64)


def _encode(rows: pa.Table, *columns: str) -> tuple[list[Any], np.ndarray]:
    """Dictionary codes of the first of `columns` that is not null in each row (nulls where all are):
    (values, int64 codes into them)."""
    present = [rows.column(c) for c in columns if c in rows.column_names]
    if not present:
        return [None], np.zeros(rows.num_rows, I64)
    col = pc.coalesce(*present) if len(present) > 1 else present[0]
    encoded = pc.dictionary_encode(col).combine_chunks()
    values = encoded.dictionary.to_pylist()
    codes = encoded.indices.fill_null(len(values)).to_numpy(zero_copy_only=False).astype(I64)
    return [*values, None], codes


def _name_codes(dt: DeviceTimeline, src: str, rows: pa.Table) -> np.ndarray:
    """Codes into dt.names of what each slice is called: the instruction's opcode, the packet's variable
    (else its queue), the collective's description; the table's name when none is known."""
    columns = {"Instruction": ("opcode",), "DmaPacket": ("variable", "queue_name"),
               "CcInstruction": ("description",)}[src]
    values, codes = _encode(rows, *columns)
    table = np.asarray([dt.name_code(src if v is None else str(v)) for v in values], np.int32)
    named: np.ndarray = table[codes]
    return named


def _layer_codes(dt: DeviceTimeline, rows: pa.Table, names: np.ndarray) -> np.ndarray:
    """Codes into dt.names of the PyTorch op each instruction belongs to: its `layer`, else its framework id
    (`raw_framework_id`), else its own name (an instruction of no known op keeps its colour)."""
    values, codes = _encode(rows, "layer")
    framework = ints(rows, "raw_framework_id") if "raw_framework_id" in rows.column_names else None
    known = rows.column("raw_framework_id").is_valid().to_numpy(zero_copy_only=False) \
        if framework is not None else np.zeros(rows.num_rows, bool)
    table = np.asarray([-1 if v is None else dt.name_code(str(v)) for v in values], np.int32)
    out = table[codes]
    if framework is not None:
        missing = np.flatnonzero((out < 0) & known)
        for fid in np.unique(framework[missing]).tolist():
            out[missing[framework[missing] == fid]] = dt.name_code(f"framework op {fid}")
    return np.where(out < 0, names, out).astype(np.int32)


def _slice_groups(src: str, rows: pa.Table, start: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """(label, group, row positions in time order) per track of one slice table: per physical core and
    timeline row (Instruction), queue type and queue (DmaPacket), CC core (CcInstruction)."""
    core = np.asarray(_int_list(rows, "core_idx" if src == "CcInstruction" else "pcore_idx"), I64)
    cores = np.unique(core)
    parts = [(cores.tolist(), np.searchsorted(cores, core).astype(I64))]
    if src != "CcInstruction":
        second = _encode(rows, "timeline_track", "engine") if src == "Instruction" else _encode(rows, "queue_type")
        parts.append(second)
        if src == "DmaPacket":
            parts.append(_encode(rows, "queue_name"))
    key = np.zeros(rows.num_rows, I64)
    for values, codes in parts:
        key = key * len(values) + codes
    uniq, inverse = np.unique(key, return_inverse=True)
    order = np.lexsort((start, inverse))
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    labels = []
    for k in uniq.tolist():
        fields = []
        for values, _ in reversed(parts):
            fields.append(values[k % len(values)])
            k //= len(values)
        labels.append(tuple(reversed(fields)))
    many_cores = src != "CcInstruction" and len(parts[0][0]) > 1
    out = []
    for i in sorted(range(len(uniq)), key=lambda i: _track_order(src, labels[i])):
        out.append((*_label(src, labels[i], many_cores), order[bounds[i]:bounds[i + 1]].astype(I64)))
    return out


def _int_list(rows: pa.Table, name: str) -> list[int]:
    values = ints(rows, name)
    return [0] * rows.num_rows if values is None else values.tolist()


def _track_order(src: str, key: tuple[Any, ...]) -> tuple[Any, ...]:
    if src == "Instruction":
        track = key[1] or ""
        rank = ENGINE_ORDER.index(track) if track in ENGINE_ORDER else len(ENGINE_ORDER)
        return (key[0], rank, track)
    return tuple("" if k is None else k for k in key)


def _label(src: str, key: tuple[Any, ...], many_cores: bool) -> tuple[str, str]:
    core = f"core {key[0]} · " if many_cores else ""
    if src == "Instruction":
        return core + str(key[1] or "?"), "engines"
    if src == "DmaPacket":
        return core + str(key[2] or "?"), f"DMA {key[1] or '?'}"
    return f"CC core {key[0]}", "CC cores"


def _counter_series(tables: Tables) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, absolute ts, value) of every counter track of one profile, per physical core."""
    out: list[tuple[str, np.ndarray, np.ndarray]] = []
    for name, column, label in COUNTER_COLUMNS:
        rows = tables.get(name)
        if rows is None or not rows.num_rows or column not in rows.column_names:
            continue
        values = rows.column(column).cast(pa.float64()).to_numpy(zero_copy_only=False)
        out += _per_core(np.asarray(_int_list(rows, "pcore_idx"), I64), label, _ts(rows), values)
    throttle = tables.get("Throttle")
    if throttle is not None and throttle.num_rows:
        out += _throttle_series(throttle)
    nodes = tables.get("FrameworkNode")
    if nodes is not None and nodes.num_rows:
        out += _per_op_series(nodes)
    return out


def _ts(rows: pa.Table) -> np.ndarray:
    ts = ints(rows, "timestamp")
    assert ts is not None
    return ts


def _per_core(pcore: np.ndarray, label: str, ts: np.ndarray, values: np.ndarray) -> list[tuple[str, np.ndarray,
                                                                                                   np.ndarray]]:
    """One series per physical core (`pcore_idx`), in time order, NaN samples left out."""
    cores = np.unique(pcore).tolist()
    out = []
    for c in cores:
        mask = (pcore == c) & ~np.isnan(values)
        order = np.argsort(ts[mask], kind="stable")
        prefix = f"core {c} · " if len(cores) > 1 else ""
        out.append((prefix + label, ts[mask][order], values[mask][order]))
    return out


def _throttle_series(rows: pa.Table) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Throttling `1 - k/n` from each row's timestamp for its duration, back to 0 after; one track per
    throttle type and core."""
    ts, dur = _ts(rows), ints(rows, "duration")
    k, n = ints(rows, "k"), ints(rows, "n")
    if dur is None or k is None or n is None:
        return []
    kinds = strings(rows, "type")
    out = []
    for kind in sorted({str(x) for x in kinds.tolist()}):
        mask = np.asarray([str(x) == kind for x in kinds.tolist()]) & (n > 0)
        level = (n[mask] - k[mask]) / n[mask]  # 1 - k/n in one rounding
        start, end = ts[mask], ts[mask] + np.maximum(dur[mask], 0)
        pcore = np.asarray(_int_list(rows, "pcore_idx"), I64)[mask]
        # ends first: the stable time sort then puts a row's end before the next row's start at the same time
        out += _per_core(np.concatenate((pcore, pcore)), f"throttling ({kind})", np.concatenate((end, start)),
                         np.concatenate((np.zeros(len(end)), level)))
    return out


def _per_op_series(nodes: pa.Table) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """`FrameworkNode.*_per_interval`: the value over each of the node's `time_intervals`, 0 between; where
    nodes overlap the later start shows."""
    intervals = [json.loads(t) if t else [] for t in strings(nodes, "time_intervals").tolist()]
    out = []
    for column, label in PER_OP:
        if column not in nodes.column_names or nodes.column(column).null_count == nodes.num_rows:
            continue
        ts: list[int] = []
        values: list[float] = []
        for spans, text in zip(intervals, strings(nodes, column).tolist(), strict=True):
            per = json.loads(text) if text else []
            for (a, b), v in zip(spans, per, strict=False):
                ts += [int(a), int(b)]
                values += [float(v), 0.0]
        if ts:
            t, v = np.asarray(ts, I64), np.asarray(values, np.float64)
            order = np.lexsort((-(np.arange(len(t)) % 2), t))  # an end before a start at the same time
            out.append((label, t[order], v[order]))
    return out


def _flow_pairs(tables: Tables, inst_ids: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
    """`Flow` rows between two instructions (`in_id` -> `out_id`) as global slice ids."""
    flow = tables.get("Flow")
    empty = (np.zeros(0, I64), np.zeros(0, I64))
    if flow is None or not flow.num_rows or not len(inst_ids):
        return empty
    inside = (strings(flow, "in_table") == "Instruction") & (strings(flow, "out_table") == "Instruction")
    a, b = ints(flow, "in_id"), ints(flow, "out_id")
    if a is None or b is None:
        return empty
    order = np.argsort(inst_ids, kind="stable")
    sorted_ids = inst_ids[order]

    def position(ids: np.ndarray) -> np.ndarray:
        at = np.clip(np.searchsorted(sorted_ids, ids), 0, len(sorted_ids) - 1)
        return np.where(sorted_ids[at] == ids, order[at], -1)

    pa_, pb = position(a), position(b)
    ok = inside & (pa_ >= 0) & (pb >= 0)
    return pa_[ok] + base, pb[ok] + base


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


def device_track_table(dt: DeviceTimeline) -> pa.Table:
    """The device tracks as rows of the run's tracks table plus `device_profile` and `group`."""
    return pa.Table.from_pylist(dt.tracks, schema=DEVICE_TRACKS)


def device_track_rows(dt: DeviceTimeline) -> list[TrackRow]:
    """The device tracks as `/tracks` rows (rank unknown: a device profile is not tied to a rank here)."""
    rows: Any = device_track_table(dt).to_pylist()
    for row in rows:
        row["rank"] = NO_RANK if row.get("rank") is None else row["rank"]
        row["host"] = row.get("host") or ""
    return list(rows)


def device_slice_arrays(dt: DeviceTimeline) -> dict[str, np.ndarray]:
    """Every device slice by position (slice id - first_slice_id): ts/dur (absolute ns), track, name and
    where it comes from."""
    return dt.columns


def build_device_index(dt: DeviceTimeline, origin_ns: int, by: str = "opcode") -> TimelineIndex:
    """A timeline index over the device tracks alone (same LOD levels as the run's slices), with slice ids
    shifted to the run-wide ids (first_slice_id + position). Slices are named (so coloured) by their own
    name, or with `by="layer"` by the PyTorch op an instruction belongs to (DEVICE_COLOURS)."""
    if by not in DEVICE_COLOURS:
        raise ValueError(f"unknown device colouring {by!r}")
    cols = device_slice_arrays(dt)
    n = len(cols["ts"])
    slices = pa.table({"track_id": pa.array(cols["track"], pa.int32()), "ts_ns": pa.array(cols["ts"], pa.int64()),
                       "dur_ns": pa.array(cols["dur"], pa.int64()), "depth": pa.array(np.zeros(n, np.int32)),
                       "name": pa.array(dt.names, pa.string()).take(pa.array(cols[DEVICE_COLOURS[by]]))})
    counters = pa.table({
        "track_id": pa.array(_cat([np.full(len(t), tid, np.int32) for tid, t, _ in dt.counter_parts], np.int32)),
        "ts_ns": pa.array(_cat([t for _, t, _ in dt.counter_parts], I64)),
        "value": pa.array(_cat([v for _, _, v in dt.counter_parts], np.float64))})
    f_from, f_to = dt.flows
    flows = pa.table({"flow_id": pa.array(np.arange(len(f_from), dtype=I64)),
                      "from_slice": pa.array(f_from - dt.first_slice_id),
                      "to_slice": pa.array(f_to - dt.first_slice_id),
                      "kind": pa.array([DEPENDENCY] * len(f_from), pa.string())})
    ix = build_timeline_index(slices, device_track_table(dt), counters, flows, origin_ns)
    ix.slice_id = ix.slice_id + dt.first_slice_id
    ix.flow_from = ix.flow_from + dt.first_slice_id
    ix.flow_to = ix.flow_to + dt.first_slice_id
    return ix
