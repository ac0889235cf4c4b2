"""Export a run as a Chrome JSON trace that Perfetto loads without dropping anything (every lane, each Neuron
device profile as its own process), streamed one Parquet row group at a time. Times are exact decimal µs,
never through a float. How tracks, overlaps and late times are written: docs/formats.md, "Perfetto export"."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from explorer.analysis.device.tracks import SLICE_TABLES, DeviceTimeline
from explorer.analysis.nesting import compute_nesting
from explorer.errors import BadRequest
from explorer.model.lanes import EXECUTE_FLOW_CATEGORIES, FlowKind
from explorer.store.runs import RunStore

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("perfetto-json",)
# The flow category each stored flow kind is written with: the explorer (and Perfetto) read `ac2g` and
# `fwdbwd` back as the same kinds; the others come back as generic flows.
FLOW_CATEGORY = {FlowKind.EXECUTE.value: "ac2g", FlowKind.FWDBWD.value: "fwdbwd", FlowKind.LAUNCH.value: "launch",
                 FlowKind.GENERIC.value: "flow", "dependency": "dependency"}
assert FLOW_CATEGORY[FlowKind.EXECUTE.value] in EXECUTE_FLOW_CATEGORIES
CHUNK_EVENTS = 4096  # events per yielded chunk
# Perfetto's JSON importer turns "ts" text into ns as llround(double(text) * 1000.0): exact while a time's
# relative error (2**-53, twice) stays below half a ns, i.e. below 2**51 ns; 2**50 (13 days) leaves a margin
EXACT_NS = 1 << 50


def check_format(fmt: str) -> None:
    if fmt not in EXPORT_FORMATS:
        raise BadRequest(f"unknown export format {fmt!r}; known: {', '.join(EXPORT_FORMATS)}",
                         {"format": fmt, "known": list(EXPORT_FORMATS)})


def us_text(ns: int) -> str:
    """Exact decimal microseconds of an integer nanosecond time: 1234567 -> "1234.567", -1 -> "-0.001"."""
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(int(ns)), 1000)
    return f"{sign}{whole}.{frac:03d}"


def export_origin(times: Iterable[np.ndarray]) -> int:
    """The ns subtracted from every exported time: 0 when the run's times (starts and ends) all lie in
    [0, EXACT_NS), else the whole second at or before the earliest (a run's span is far below EXACT_NS)."""
    parts = [np.asarray(t, dtype=np.int64) for t in times]
    parts = [t for t in parts if len(t)]
    if not parts:
        return 0
    lo, hi = min(int(t.min()) for t in parts), max(int(t.max()) for t in parts)
    return 0 if lo >= 0 and hi < EXACT_NS else (lo // 10**9) * 10**9


@dataclass
class _Threads:
    """pid per process, tid per (track, sub-row): the mapping and the metadata events that name them."""

    pids: dict[str, int] = field(default_factory=dict)
    tids: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)  # (track, sub-row) -> (pid, tid)
    meta: list[str] = field(default_factory=list)

    def pid(self, process: str, sort_index: int) -> int:
        if process not in self.pids:
            pid = self.pids[process] = len(self.pids) + 1
            self.meta.append(_event({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                                     "args": {"name": process}}))
            self.meta.append(_event({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                                     "args": {"sort_index": sort_index}}))
        return self.pids[process]

    def tid(self, track: int, sub: int, pid: int, label: str, sort_index: int) -> tuple[int, int]:
        key = (track, sub)
        if key not in self.tids:
            tid = len(self.tids) + 1
            self.tids[key] = (pid, tid)
            name = label if sub == 0 else f"{label} (overlap {sub})"
            self.meta.append(_event({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}))
            self.meta.append(_event({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                                     "args": {"sort_index": sort_index}}))
        return self.tids[key]


def _event(fields: dict[str, Any]) -> str:
    return json.dumps(fields, separators=(",", ":"))


def _process_name(row: dict[str, Any]) -> str:
    instance = str(row.get("instance") or "")
    process = str(row.get("process") or "")
    return f"{process} [{instance}]" if instance else process


def iter_perfetto_json(store: RunStore, run_id: str, device: DeviceTimeline | None = None) -> Iterator[bytes]:
    """The run as one Chrome JSON object (`traceEvents` plus `otherData`), in chunks of bytes."""
    rec = store.require_ready(run_id)
    tracks = store.table(run_id, "tracks").to_pylist()
    track_by_id = {int(t["track_id"]): t for t in tracks}
    slices = store.table(run_id, "slices")
    track_col = slices.column("track_id").to_numpy().astype(np.int64)
    ts_col = slices.column("ts_ns").to_numpy()
    dur_col = slices.column("dur_ns").to_numpy()
    sub_row = compute_nesting(track_col, np.zeros(len(track_col), np.int64), ts_col, dur_col).sub_row
    threads = _Threads()
    for t in tracks:  # every track gets its thread (and metadata) in display order, empty or not
        pid = threads.pid(_process_name(t), int(t["sort_key"]))
        threads.tid(int(t["track_id"]), 0, pid, str(t["label"]), int(t["sort_key"]))
    for track, sub in sorted(set(zip(track_col.tolist(), sub_row.tolist(), strict=True)) - set(threads.tids)):
        t = track_by_id[track]
        threads.tid(track, sub, threads.pids[_process_name(t)], str(t["label"]), int(t["sort_key"]))
    slice_tid = np.array([threads.tids[(tr, sb)][1] for tr, sb in zip(track_col.tolist(), sub_row.tolist(),
                                                                       strict=True)], dtype=np.int64)
    pid_of_tid = {tid: pid for pid, tid in threads.tids.values()}
    dev = _DeviceParts.of(device, threads) if device is not None else None
    origin = export_origin([ts_col, ts_col + dur_col, store.table(run_id, "instants").column("ts_ns").to_numpy(),
                            store.table(run_id, "counters").column("ts_ns").to_numpy(),
                            *(dev.times() if dev is not None else [])])
    other = {"exported_by": "trace-explorer", "run_id": rec.id, "run_name": rec.name, "format": "perfetto-json"}
    head = b'{"otherData":' + _event(other).encode()
    if origin:  # the times below are relative to it
        head += b',"baseTimeNanoseconds":' + str(origin).encode()
    yield head + b',"traceEvents":[\n'
    first = True

    def emit(lines: Iterable[str]) -> Iterator[bytes]:
        """Event lines, lazily, as comma-joined chunks of CHUNK_EVENTS."""
        nonlocal first
        it = iter(lines)
        while chunk := list(islice(it, CHUNK_EVENTS)):
            part = ",\n".join(chunk)
            yield (part if first else ",\n" + part).encode()
            first = False

    yield from emit(threads.meta)
    yield from _slice_events(store, run_id, slice_tid, pid_of_tid, emit, origin)
    yield from emit(_instant_events(store, run_id, threads, origin))
    yield from emit(_counter_events(store, run_id, tracks, threads, origin))
    yield from emit(_flow_events(store.table(run_id, "flows"), slice_tid, pid_of_tid, ts_col, dur_col, origin))
    if dev is not None:
        yield from emit(dev.events(origin))
    yield b"\n]}\n"


def write_perfetto_json(store: RunStore, run_id: str, out: IO[bytes], device: DeviceTimeline | None = None) -> int:
    """Stream the export into a binary file; returns the bytes written."""
    size = 0
    for chunk in iter_perfetto_json(store, run_id, device):
        out.write(chunk)
        size += len(chunk)
    return size


def _slice_events(store: RunStore, run_id: str, slice_tid: np.ndarray, pid_of_tid: dict[int, int],
                  emit: Any, origin: int) -> Iterator[bytes]:
    """`X` events, one Parquet row group at a time (args are the stored JSON text, spliced in as is)."""
    pf = pq.ParquetFile(store.table_path(run_id, "slices"))
    columns = ["slice_id", "ts_ns", "dur_ns", "name", "cat", "args"]
    for group in range(pf.num_row_groups):
        t = pf.read_row_group(group, columns=columns).to_pydict()
        yield from emit(
            f'{{"ph":"X","name":{json.dumps(name)},"cat":{json.dumps(cat)},"pid":{pid_of_tid[int(slice_tid[sid])]},'
            f'"tid":{int(slice_tid[sid])},"ts":{us_text(ts - origin)},"dur":{us_text(dur)},"args":{args or "{}"}}}'
            for sid, ts, dur, name, cat, args in zip(t["slice_id"], t["ts_ns"], t["dur_ns"], t["name"], t["cat"],
                                                     t["args"], strict=True))


def _instant_events(store: RunStore, run_id: str, threads: _Threads, origin: int) -> Iterator[str]:
    inst = store.table(run_id, "instants").to_pydict()
    for track, ts, name, cat, args in zip(inst["track_id"], inst["ts_ns"], inst["name"], inst["cat"], inst["args"],
                                          strict=True):
        pid, tid = threads.tids[(int(track), 0)]
        yield (f'{{"ph":"i","s":"t","name":{json.dumps(name)},"cat":{json.dumps(cat)},"pid":{pid},'
               f'"tid":{tid},"ts":{us_text(ts - origin)},"args":{args or "{}"}}}')


def _counter_lines(pid: int, label: str, ts: np.ndarray, values: np.ndarray) -> Iterator[str]:
    """`C` events of one series: the name is the series, one arg holds the value (read back as `name`)."""
    name = json.dumps(label)
    for t, v in zip(ts.tolist(), values.tolist(), strict=True):
        yield f'{{"ph":"C","name":{name},"pid":{pid},"tid":0,"ts":{us_text(t)},"args":{{"value":{_number(v)}}}}}'


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**63 else repr(float(value))


def _counter_events(store: RunStore, run_id: str, tracks: list[dict[str, Any]], threads: _Threads,
                    origin: int) -> Iterator[str]:
    counters = store.table(run_id, "counters")
    track = counters.column("track_id").to_numpy()
    ts, values = counters.column("ts_ns").to_numpy(), counters.column("value").to_numpy()
    for t in tracks:
        if t["kind"] == "counter":
            rows = np.flatnonzero(track == int(t["track_id"]))
            yield from _counter_lines(threads.pids[_process_name(t)], str(t["label"]), ts[rows] - origin,
                                      values[rows])


def binding_points(tid: np.ndarray, ts: np.ndarray, dur: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each slice of `ends` (flow endpoints), a time at which it is the innermost slice covering it on its
    thread, so a reader binding a flow step to the enclosing slice (Chrome's rule, Perfetto's and the
    explorer's) finds it: its start, unless a descendant starts there too; then 1 ns after the descendants
    that cover its start end (its start still, when they cover it to its end)."""
    out: np.ndarray = np.array(ts[ends], dtype=np.int64)
    if len(ends) == 0:
        return out
    order = np.lexsort((-dur, ts, tid))
    pos = np.empty_like(order)
    pos[order] = np.arange(len(order))
    p = pos[ends]
    nxt = order[np.minimum(p + 1, len(order) - 1)]
    shared_start = (p + 1 < len(order)) & (tid[nxt] == tid[ends]) & (ts[nxt] == ts[ends]) & (nxt != ends)
    for k in np.flatnonzero(shared_start).tolist():
        s = int(ends[k])
        end, cover, j = int(ts[s] + dur[s]), int(ts[s]), int(p[k]) + 1
        while j < len(order) and tid[order[j]] == tid[s] and ts[order[j]] <= cover + 1 and ts[order[j]] < end:
            cover = max(cover, int(ts[order[j]] + dur[order[j]]))
            j += 1
        if cover + 1 < end:
            out[k] = cover + 1
    return out


def _flow_lines(flow_id: int, cat: str, a: tuple[int, int, int], b: tuple[int, int, int]) -> list[str]:
    """One flow as a start step and an end step, each bound to the slice enclosing its time (`bp: e`). A flow
    whose target binds before its source is written in time order (`s` on the target): Perfetto pairs the
    steps in time order and drops an `f` read before its `s` (`flow_end_without_start`), and the explorer's
    reader pairs them in time order too."""
    if b[2] < a[2]:
        a, b = b, a
    head = f'"name":"flow","cat":{json.dumps(cat)},"id":{flow_id}'
    return [f'{{"ph":"s",{head},"pid":{a[0]},"tid":{a[1]},"ts":{us_text(a[2])}}}',
            f'{{"ph":"f","bp":"e",{head},"pid":{b[0]},"tid":{b[1]},"ts":{us_text(b[2])}}}']


def _flow_events(flows: pa.Table, slice_tid: np.ndarray, pid_of_tid: dict[int, int], ts: np.ndarray,
                 dur: np.ndarray, origin: int) -> Iterator[str]:
    f_from, f_to = flows.column("from_slice").to_numpy(), flows.column("to_slice").to_numpy()
    at_from = (binding_points(slice_tid, ts, dur, f_from) - origin).tolist()
    at_to = (binding_points(slice_tid, ts, dur, f_to) - origin).tolist()
    for i, (fid, a, b, kind) in enumerate(zip(flows.column("flow_id").to_pylist(), f_from.tolist(), f_to.tolist(),
                                              flows.column("kind").to_pylist(), strict=True)):
        ta, tb = int(slice_tid[a]), int(slice_tid[b])
        yield from _flow_lines(int(fid) + 1, FLOW_CATEGORY.get(kind, "flow"), (pid_of_tid[ta], ta, at_from[i]),
                               (pid_of_tid[tb], tb, at_to[i]))


@dataclass
class _DeviceParts:
    """The device tracks of a run's Neuron profiles as processes (one per profile) and threads."""

    dt: DeviceTimeline
    threads: _Threads
    slice_tid: np.ndarray
    counter_pid: dict[int, int]
    first_flow: int = 1 << 40  # above the run's own flow ids

    @classmethod
    def of(cls, dt: DeviceTimeline, threads: _Threads) -> _DeviceParts:
        cols = dt.columns
        track, ts, dur = cols["track"].astype(np.int64), cols["ts"], cols["dur"]
        sub_row = compute_nesting(track, np.zeros(len(track), np.int64), ts, dur).sub_row
        counter_pid: dict[int, int] = {}
        for t in dt.tracks:
            pid = threads.pid(f"Neuron device profile {t['device_profile']}", int(t["sort_key"]))
            label = f"{t['group']} / {t['label']}" if t.get("group") else str(t["label"])
            if t["kind"] == "counter":
                counter_pid[int(t["track_id"])] = pid
            else:
                threads.tid(int(t["track_id"]), 0, pid, label, int(t["sort_key"]))
        by_track = {int(t["track_id"]): t for t in dt.tracks}
        for tr, sb in sorted(set(zip(track.tolist(), sub_row.tolist(), strict=True)) - set(threads.tids)):
            t = by_track[tr]
            threads.tid(tr, sb, threads.pids[f"Neuron device profile {t['device_profile']}"], str(t["label"]),
                        int(t["sort_key"]))
        tids = np.array([threads.tids[(tr, sb)][1] for tr, sb in zip(track.tolist(), sub_row.tolist(), strict=True)],
                        dtype=np.int64)
        return cls(dt, threads, tids, counter_pid)

    def times(self) -> list[np.ndarray]:
        """Every time the device tracks export (slice starts and ends, counter samples), for the origin."""
        cols = self.dt.columns
        return [cols["ts"], cols["ts"] + cols["dur"], *(ts for _, ts, _ in self.dt.counter_parts)]

    def events(self, origin: int) -> Iterator[str]:
        dt, cols = self.dt, self.dt.columns
        pid_of_tid = {tid: pid for pid, tid in self.threads.tids.values()}
        names = [json.dumps(n) for n in dt.names]
        for tid, ts, dur, name, table in zip(self.slice_tid.tolist(), cols["ts"].tolist(), cols["dur"].tolist(),
                                             cols["name"].tolist(), cols["source_table"].tolist(), strict=True):
            yield (f'{{"ph":"X","name":{names[name]},"cat":"{SLICE_TABLES[table]}","pid":{pid_of_tid[tid]},'
                   f'"tid":{tid},"ts":{us_text(ts - origin)},"dur":{us_text(dur)}}}')
        labels = {int(t["track_id"]): str(t["label"]) for t in dt.tracks}
        for track, ts_arr, values in dt.counter_parts:
            yield from _counter_lines(self.counter_pid[track], labels[track], ts_arr - origin, values)
        f_from, f_to = dt.flows[0] - dt.first_slice_id, dt.flows[1] - dt.first_slice_id
        at_from = (binding_points(self.slice_tid, cols["ts"], cols["dur"], f_from) - origin).tolist()
        at_to = (binding_points(self.slice_tid, cols["ts"], cols["dur"], f_to) - origin).tolist()
        for k, (a, b) in enumerate(zip(f_from.tolist(), f_to.tolist(), strict=True)):
            ta, tb = int(self.slice_tid[a]), int(self.slice_tid[b])
            yield from _flow_lines(self.first_flow + k, FLOW_CATEGORY["dependency"], (pid_of_tid[ta], ta, at_from[k]),
                                   (pid_of_tid[tb], tb, at_to[k]))
