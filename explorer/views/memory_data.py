"""A run's memory data for the pages (memory, ops, compare, timeline): its `[memory]` instants read from the store
(args decoded once, in time order, each on its host thread) and the framework slices of those threads, and the
memory twin's result (`MemoryResult`, kept per run). No page, figure or word here (explorer/views/memory.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from typing_extensions import TypedDict

from explorer.analysis.alloc_snapshot import SnapshotDevice, compute_snapshot
from explorer.analysis.hbm import HbmUsage, compute_hbm, is_hbm_series
from explorer.analysis.memory import (
    MemoryEvents,
    MemoryReport,
    ThreadOps,
    compare_peaks,
    compute_memory,
    compute_owners,
    device_name,
)
from explorer.analysis.memory_categories import CategoryTimeline, compute_categories
from explorer.analysis.onchip_memory import OnChipMemory, compute_onchip_memory
from explorer.errors import BadRequest
from explorer.ingest.memory_timeline import CATEGORIES
from explorer.model.lanes import Lane
from explorer.model.shapes import MemoryPeakDelta
from explorer.store.runs import RunStore

MEMORY_NAME = "[memory]"
STEP_PREFIX = "ProfilerStep#"


def read_memory_events(store: RunStore, run_id: str) -> tuple[dict[int, int], MemoryEvents] | None:
    """A ready run's [memory] events (times from the run's start) and, per track id, the index of its host thread in
    the events' `thread` (-1: a thread with no [memory] event); None when the run has no usable events."""
    read = read_thread_events(store, run_id)
    if read is None:
        return None
    thread_of_track, keys, events = read
    index = {key: i for i, key in enumerate(keys)}
    return {track: index.get(key, -1) for track, key in thread_of_track.items()}, events


def read_thread_events(store: RunStore, run_id: str) -> tuple[dict[int, tuple[str, str, str]], list[tuple[str, str, str]],
                                                               MemoryEvents] | None:
    """A ready run's host thread per track id, the threads of its [memory] events and the events (times from the
    run's start); None when the run has no usable events."""
    rec = store.require_ready(run_id)
    thread_of_track = thread_keys(store.table(run_id, "tracks"))
    try:
        read = memory_events(store.table(run_id, "instants"), thread_of_track, rec.summary.start_ns)
    except NoAddresses:
        return None
    return None if read is None else (thread_of_track, read[0], read[1])


def thread_keys(tracks: pa.Table) -> dict[int, tuple[str, str, str]]:
    """track id -> its host thread (instance, process, thread)."""
    cols = [tracks.column(c).to_pylist() for c in ("track_id", "instance", "process", "thread")]
    return {tid: (inst, proc, th) for tid, inst, proc, th in zip(*cols, strict=True)}


class NoAddresses(Exception):
    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


def memory_events(instants: pa.Table, thread_of_track: dict[int, tuple[str, str, str]],
                   origin: int) -> tuple[list[tuple[str, str, str]], MemoryEvents] | None:
    """The run's [memory] instants with an address and a byte count, in time order (ties: the stored order)."""
    mem = instants.filter(pc.equal(instants.column("name"), MEMORY_NAME))
    if not mem.num_rows:
        return None
    raws = mem.column("args").to_pylist()
    try:  # one decode of them all (a tenth of the time of one per event)
        parsed = _DECODE_MANY("[" + ",".join(raws) + "]")
    except (msgspec.DecodeError, RecursionError):
        parsed = [_args(raw) for raw in raws]
    keep = [i for i, a in enumerate(parsed) if _is_int(a.nbytes) and _is_int(a.addr)]
    if not keep:
        raise NoAddresses(len(parsed))
    tracks = mem.column("track_id").to_numpy()[keep]
    ts = mem.column("ts_ns").to_numpy()[keep] - origin
    order = np.lexsort((np.arange(len(keep)), ts))  # time order, stored order on ties
    keys: dict[tuple[str, str, str], int] = {}
    thread_of = {int(t): keys.setdefault(thread_of_track[int(t)], len(keys)) for t in np.unique(tracks)}
    args = [parsed[keep[i]] for i in order.tolist()]
    devices: dict[tuple[object, object], str] = {}
    events = MemoryEvents(
        ts_ns=ts[order], thread=np.asarray([thread_of[int(t)] for t in tracks[order]], np.int64),
        addr=[a.addr for a in args], nbytes=np.asarray([a.nbytes for a in args], np.int64),
        allocated=np.asarray([_int(a.allocated) for a in args], np.int64),
        reserved=np.asarray([_int(a.reserved) for a in args], np.int64),
        device=[_device(a, devices) for a in args])
    return list(keys), events


def _device(args: _MemoryArgs, known: dict[tuple[object, object], str]) -> str:
    if type(args.device_type) not in (int, str) or type(args.device_id) not in (int, str):
        return device_name(args.device_type, args.device_id)  # (a float, a bool, a list: not a key)
    key = (args.device_type, args.device_id)
    if (name := known.get(key)) is None:
        name = known[key] = device_name(*key)
    return name


class _MemoryArgs(msgspec.Struct, gc=False):
    """The args of a [memory] instant this page reads (any JSON value; checked as it is used)."""

    addr: Any = msgspec.field(name="Addr", default=None)
    nbytes: Any = msgspec.field(name="Bytes", default=None)
    allocated: Any = msgspec.field(name="Total Allocated", default=None)
    reserved: Any = msgspec.field(name="Total Reserved", default=None)
    device_type: Any = msgspec.field(name="Device Type", default=0)
    device_id: Any = msgspec.field(name="Device Id", default=-1)


_DECODE_ARGS = msgspec.json.Decoder(_MemoryArgs).decode
_DECODE_MANY = msgspec.json.Decoder(list[_MemoryArgs]).decode


def _args(raw: str) -> _MemoryArgs:
    try:
        return _DECODE_ARGS(raw)
    except (msgspec.DecodeError, RecursionError):  # (args not an object, or not JSON: no address, skipped)
        return _MemoryArgs()


def _is_int(value: object) -> bool:
    return type(value) is int and -(2**63) < value < 2**63


def _int(value: object) -> int:
    """A total as an int: integral floats too (a writer's 2.71e+9), else 0."""
    if type(value) is float and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value if type(value) is int and -(2**63) < value < 2**63 else 0


def thread_ops(slices: pa.Table, thread_of_track: dict[int, tuple[str, str, str]], keys: list[tuple[str, str, str]],
                origin: int) -> tuple[list[ThreadOps | None], list[tuple[str, int, int]]]:
    """Per memory thread (keys' order) its framework slices; and the ProfilerSteps (name, start, end)."""
    host = slices.filter(pc.equal(slices.column("lane"), Lane.FRAMEWORK.value))
    index = {key: i for i, key in enumerate(keys)}
    tracks = np.asarray(sorted(thread_of_track), dtype=np.int64)
    of_track = np.full(int(tracks.max()) + 1 if len(tracks) else 1, -1, dtype=np.int64)
    for track, key in thread_of_track.items():
        of_track[track] = index.get(key, -1)
    thread = of_track[host.column("track_id").to_numpy()]
    start = host.column("ts_ns").to_numpy() - origin
    end = start + host.column("dur_ns").to_numpy()
    is_step = pc.starts_with(host.column("name"), STEP_PREFIX).to_numpy(zero_copy_only=False)
    step_names = host.column("name").filter(pa.array(is_step)).to_pylist()
    steps = set(zip(step_names, start[is_step].tolist(), end[is_step].tolist(), strict=True))
    ops: list[ThreadOps | None] = []
    for i in range(len(keys)):
        at = np.flatnonzero(thread == i)
        if not len(at):
            ops.append(None)
            continue
        picked = pa.array(at)
        ops.append(ThreadOps(start[at], end[at], host.column("name").take(picked).to_pylist(),
                             host.column("cat").take(picked).to_pylist()))
    return ops, sorted(steps, key=lambda s: s[1])


class MemoryResult(TypedDict):
    """GET /api/runs/{id}/memory: the report of the [memory] events, or `report: null` with the reason when the
    run has none; and the allocator snapshots' devices (explorer.analysis.alloc_snapshot), [] when none."""

    run_id: str
    report: MemoryReport | None
    reason: str
    snapshot: list[SnapshotDevice]
    categories: CategoryTimeline | None  # from export_memory_timeline output in the run; times from the run's start
    hbm: list[HbmUsage]  # Neuron HBM by usage type (the system profile's counters), [] when none
    onchip: list[OnChipMemory]  # Neuron device profiles' SBUF allocations and SBUF/PSUM usage; times relative
    baseline: str  # ?baseline=RUN: the run compared against ("" none)
    compare: list[MemoryPeakDelta]  # each device's peak against the baseline's, by owner


NO_ADDRESSES = ("this run's {count:,} [memory] events carry no Addr (older profilers wrote only Bytes): "
                "allocations cannot be paired with their frees; profile again with a current PyTorch")
NO_EVENTS = ("this run has no [memory] events: profile with torch.profiler(profile_memory=True) (runs ingested "
             "before memory events were kept need ingesting again)")


def compute_run_memory(store: RunStore, run_id: str, baseline: str = "") -> MemoryResult:
    """The memory report of a ready run, from its stored [memory] instants and framework slices (and its allocator
    snapshots and export_memory_timeline files); with a baseline run, each peak against the baseline's."""
    result = _cached_memory(store, run_id)
    if baseline:
        other = _cached_memory(store, baseline)["report"]
        if result["report"] is None or other is None:
            raise BadRequest(f"memory compare needs [memory] events in both runs ({run_id}, {baseline})")
        result["baseline"], result["compare"] = baseline, compare_peaks(result["report"], other)
    return result


def _cached_memory(store: RunStore, run_id: str) -> MemoryResult:
    """The run's memory result, computed once per run (runs are immutable) and kept in the store's memo of derived
    values as its JSON bytes (what the memo's budget can weigh; a decode is milliseconds)."""
    encoded = store.derived.get(run_id, "memory", lambda: msgspec.json.encode(_run_memory(store, run_id)))
    result: MemoryResult = msgspec.json.decode(encoded)
    return result


def _run_memory(store: RunStore, run_id: str) -> MemoryResult:
    rec = store.require_ready(run_id)
    origin = rec.summary.start_ns
    tracks = store.table(run_id, "tracks")
    thread_of_track = thread_keys(tracks)
    snapshot = _snapshot(store, run_id)
    categories = None
    if store.table_path(run_id, "memory_categories").exists():
        # (the profiler's clock: from the run's start when its changes fall in the run, else from the first change)
        table = store.table(run_id, "memory_categories")
        categories = compute_categories(table, origin if _within_run(table, rec.summary.start_ns,
                                                                     rec.summary.end_ns) else None, CATEGORIES)
    hbm = compute_hbm(_hbm_series(store.table(run_id, "counters"), tracks, origin))
    onchip = _onchip(store, run_id, origin)
    try:
        read = memory_events(store.table(run_id, "instants"), thread_of_track, origin)
    except NoAddresses as exc:
        return MemoryResult(run_id=run_id, report=None, reason=NO_ADDRESSES.format(count=exc.count),
                            snapshot=snapshot, categories=categories, hbm=hbm, onchip=onchip, baseline="", compare=[])
    if read is None:
        return MemoryResult(run_id=run_id, report=None, reason=NO_EVENTS, snapshot=snapshot, categories=categories,
                            hbm=hbm, onchip=onchip, baseline="", compare=[])
    keys, events = read
    slices = store.table(run_id, "slices")
    ops, steps = thread_ops(slices, thread_of_track, keys, origin)
    report = compute_memory(events, compute_owners(events, ops), steps)
    return MemoryResult(run_id=run_id, report=report, reason="", snapshot=snapshot, categories=categories,
                        hbm=hbm, onchip=onchip, baseline="", compare=[])


def _hbm_series(counters: pa.Table, tracks: pa.Table, origin: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The HBM counter series by label (times from the run's start), in time order."""
    labels = dict(zip(tracks.column("track_id").to_pylist(), tracks.column("label").to_pylist(), strict=True))
    kinds = dict(zip(tracks.column("track_id").to_pylist(), tracks.column("kind").to_pylist(), strict=True))
    wanted = [t for t, label in labels.items() if kinds[t] == "counter" and is_hbm_series(label)]
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if not wanted:
        return out
    rows = counters.filter(pc.is_in(counters.column("track_id"), pa.array(wanted, pa.int32())))
    track, ts, value = (rows.column(c).to_numpy() for c in ("track_id", "ts_ns", "value"))
    for t in wanted:
        at = np.flatnonzero(track == t)
        order = at[np.argsort(ts[at], kind="stable")]
        out[labels[t]] = (ts[order] - origin, value[order])
    return out


ONCHIP_TABLES = ("SbufAllocation", "SbufUsage", "PsumUsage")


def _onchip(store: RunStore, run_id: str, origin: int) -> list[OnChipMemory]:
    """Each device profile's on-chip memory (its SBUF / PSUM tables), times from the run's start."""
    out: list[OnChipMemory] = []
    for row in store.device_profiles(run_id).to_pylist():
        names = [t for t in ONCHIP_TABLES if t in (row["tables"] or [])]
        if not names:
            continue
        found = compute_onchip_memory(row["profile_id"], row["name"],
                                      {t: store.device_table(run_id, row["profile_id"], t) for t in names})
        if found is not None:
            found["sbuf_peak_ns"] = found["sbuf_peak_ns"] - origin if found["sbuf_peak_ns"] >= 0 else -1
            found["usage"] = [{**u, "at_ns": u["at_ns"] - origin} for u in found["usage"]]
            out.append(found)
    return out


def _within_run(table: pa.Table, start_ns: int, end_ns: int) -> bool:
    ts = table.column("ts_ns").to_numpy()
    timed = ts[ts >= 0]
    return end_ns > start_ns and bool(len(timed)) and start_ns <= int(timed.min()) <= end_ns


def _snapshot(store: RunStore, run_id: str) -> list[SnapshotDevice]:
    """The run's allocator snapshot report; [] for a run without one (older runs have no such tables)."""
    if not store.table_path(run_id, "alloc_trace").exists():
        return []
    return compute_snapshot(store.table(run_id, "alloc_trace"), store.table(run_id, "alloc_blocks"))


def run_peak_memory(store: RunStore, run_id: str) -> int | None:
    """The run's peak memory for the gate (`check --metric peak_memory`): the highest Total Allocated of any
    device; None without [memory] events."""
    report = compute_run_memory(store, run_id)["report"]
    return None if report is None else max(p["bytes"] for p in report["peaks"])
