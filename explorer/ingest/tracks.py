"""Raw threads, what a trace says about them (names, sort indices, device labels), and the tracks table
built from them: one helper (ThreadBook.track_row) writes every row, for slice, counter and instant tracks.

Which sub-row a slice goes to is decided elsewhere (explorer.analysis.nesting); this only lays tracks out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from explorer.model.lanes import LANE_ORDER, Lane
from explorer.model.ranks import NO_RANK
from explorer.model.tables import COUNTERS, INSTANTS

_LANES = list(Lane)


@dataclass
class RawThread:
    src: int
    pid: str
    tid: str


class ThreadBook:
    """Raw thread indices for (source, pid, tid), and the metadata that names and orders them."""

    def __init__(self) -> None:
        self.info: list[RawThread] = []
        self._index: dict[tuple[int, str, str], int] = {}
        self.process_names: dict[tuple[int, str], str] = {}
        self.thread_names: dict[tuple[int, str, str], str] = {}
        self.process_sort: dict[tuple[int, str], int] = {}
        self.thread_sort: dict[tuple[int, str, str], int] = {}
        self.devices: dict[tuple[int, str], str] = {}
        self.instances: dict[int, str] = {}  # source -> instance (rank, host) label
        self.ranks: dict[int, int] = {}  # source -> rank (explorer.ingest.ranks), -1 unknown
        self.hosts: dict[int, str] = {}  # source -> host, "" unknown
        self.label_ranks = False  # several ranks: every track label starts "rank N · "

    def thread(self, src: int, pid: object, tid: object) -> int:
        key = (src, str(pid), str(tid))
        idx = self._index.get(key)
        if idx is None:
            idx = len(self.info)
            self._index[key] = idx
            self.info.append(RawThread(src, key[1], key[2]))
        return idx

    def sort_key(self, t: int, lane: int, sub: int) -> tuple[object, ...]:
        """Tracks order by lane, rank (unknown last), source, process (sort index, then id), thread
        (likewise), sub-row."""
        info = self.info[t]
        rank = self.ranks.get(info.src, NO_RANK)
        return (lane, rank if rank != NO_RANK else 1 << 40, info.src, self.process_sort.get((info.src, info.pid), 0), natural(info.pid),
                self.thread_sort.get((info.src, info.pid, info.tid), 0), natural(info.tid), sub)

    def process_label(self, src: int, pid: str) -> str:
        return self.process_names.get((src, pid)) or f"process {pid}"

    def thread_label(self, t: int) -> str:
        info = self.info[t]
        return self.thread_names.get((info.src, info.pid, info.tid)) or f"thread {info.tid}"

    def track_row(self, track_id: int, lane: str, kind: str, src: int, pid: str, *, thread: str, label: str,
                  device: str, count: int, max_depth: int = 0) -> dict[str, object]:
        """One row of the tracks table; its sort key is its id (ids are given in display order). In a run of
        several ranks the label names the rank first (`rank 3 · thread 59811 (python3)`)."""
        rank = self.ranks.get(src, NO_RANK)
        if self.label_ranks and rank != NO_RANK:
            label = f"rank {rank} · {label}"
        return {
            "track_id": track_id, "lane": lane, "kind": kind, "instance": self.instances.get(src, ""),
            "process": self.process_label(src, pid), "thread": thread, "label": label, "device": device,
            "sort_key": track_id, "max_depth": max_depth, "count": count, "rank": rank,
            "host": self.hosts.get(src, ""),
        }

    def layout(self, thread: np.ndarray, lane: np.ndarray, sub_row: np.ndarray,
               tracks: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[list[tuple[int, int, int]], np.ndarray]:
        """One track per (thread, lane, sub-row), numbered in sort_key order; and each slice's track.
        `tracks`, when known already (explorer.ingest.linked), is np.unique's answer for track_codes()."""
        if len(thread) == 0:
            return [], np.zeros(0, dtype=np.int64)
        uniq, inverse = tracks if tracks is not None else np.unique(track_codes(thread, lane, sub_row),
                                                                    return_inverse=True)
        keys = [(int(c // 4096 // 8), int(c // 4096 % 8), int(c % 4096)) for c in uniq]
        sort_keys = [self.sort_key(t, ln, sub) for t, ln, sub in keys]
        rank = sorted(range(len(keys)), key=lambda i: sort_keys[i])
        new_index = np.empty(len(keys), dtype=np.int64)
        new_index[rank] = np.arange(len(keys))
        return [keys[i] for i in rank], new_index[inverse]

    def slice_track_rows(self, keys: list[tuple[int, int, int]], raw_track: np.ndarray,
                         depth: np.ndarray) -> list[dict[str, object]]:
        counts = np.bincount(raw_track, minlength=len(keys)) if len(keys) else np.zeros(0, np.int64)
        # of depth's own type: ufunc.at's fast path needs no cast (int64 against int32 depths: 65 ms for the
        # 1M-event file's 667k slices, 1 ms without)
        max_depth = np.zeros(len(keys), dtype=depth.dtype)
        if len(raw_track):
            np.maximum.at(max_depth, raw_track, depth)
        rows: list[dict[str, object]] = []
        for i, (t, ln, sub) in enumerate(keys):
            info = self.info[t]
            label, device = self.thread_label(t), self.devices.get((info.src, info.pid), "")
            if _LANES[ln] == Lane.HARDWARE:
                label, device = self.device_names(t)
            rows.append(self.track_row(
                i, _LANES[ln].value, "slice", info.src, info.pid, thread=info.tid,
                label=label if sub == 0 else f"{label} (overlap {sub})",
                device=device, count=int(counts[i]), max_depth=int(max_depth[i])))
        return rows

    def device_names(self, t: int) -> tuple[str, str]:
        """(label, device) of a device thread. A thread without a name is named from what Kineto's ids say
        (pid = device index, tid = stream): `GPU 0 · stream 7`, on device `GPU 0` unless the process is labelled."""
        info = self.info[t]
        device = self.devices.get((info.src, info.pid), "")
        named = self.thread_names.get((info.src, info.pid, info.tid))
        if named:  # (a named thread of an unlabelled process keeps its name: Neuron's `neuron_hw/NC:0`)
            return named, device
        device = device or device_from_pid(info.pid)
        return f"{device} · stream {info.tid}", device


def track_codes(thread: np.ndarray, lane: np.ndarray, sub_row: np.ndarray) -> np.ndarray:
    """One code per (thread, lane, sub-row) a slice is on, ordered by thread first (lanes < 8, sub-rows < 4096)."""
    codes: np.ndarray = (thread * 8 + lane) * 4096 + sub_row
    return codes


def counter_tables(book: ThreadBook, counters: dict[tuple[int, str, str], tuple[list[int], list[float]]],
                   lanes: dict[tuple[int, str, str], str], first_track: int) -> tuple[pa.Table, list[dict[str, object]]]:
    """The counters table (each series in time order) and one track row per series, ids from first_track."""
    rows: list[dict[str, object]] = []
    tids: list[np.ndarray] = []
    tss: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for i, key in enumerate(sorted(counters, key=lambda k: (k[0], natural(k[1]), k[2]))):
        src, pid, series = key
        ts_list, val_list = counters[key]
        ts_arr = np.asarray(ts_list, dtype=np.int64)
        order = np.argsort(ts_arr, kind="stable")
        track_id = first_track + i
        rows.append(book.track_row(track_id, lanes[key], "counter", src, pid, thread="", label=series,
                                   device=book.devices.get((src, pid), ""), count=len(ts_list)))
        tids.append(np.full(len(ts_list), track_id, dtype=np.int32))
        tss.append(ts_arr[order])
        vals.append(np.asarray(val_list, dtype=np.float64)[order])
    if not rows:
        return COUNTERS.empty_table(), rows
    table = pa.table({"track_id": np.concatenate(tids), "ts_ns": np.concatenate(tss),
                      "value": np.concatenate(vals)}, schema=COUNTERS)
    return table, rows


def instant_tables(book: ThreadBook, instants: list[tuple[int, int, str, str, str]],
                   first_track: int) -> tuple[pa.Table, list[dict[str, object]]]:
    """The instants table and one track row per thread that has instants, ids from first_track."""
    if not instants:
        return INSTANTS.empty_table(), []
    by_thread = sorted({t for t, *_ in instants},
                       key=lambda t: book.sort_key(t, LANE_ORDER[Lane.OTHER], 0))
    track_of = {t: first_track + i for i, t in enumerate(by_thread)}
    counts = Counter(it[0] for it in instants)
    rows: list[dict[str, object]] = []
    for t in by_thread:
        info = book.info[t]
        rows.append(book.track_row(track_of[t], Lane.OTHER.value, "instant", info.src, info.pid, thread=info.tid,
                                   label=book.thread_label(t) + " (instants)", device="", count=counts[t]))
    inst = sorted(instants, key=lambda it: (track_of[it[0]], it[1]))
    table = pa.table(
        {
            "track_id": pa.array([track_of[it[0]] for it in inst], pa.int32()),
            "ts_ns": pa.array([it[1] for it in inst], pa.int64()),
            "name": pa.array([it[2] for it in inst], pa.string()),
            "cat": pa.array([it[3] for it in inst], pa.string()),
            "args": pa.array([it[4] for it in inst], pa.string()),
        },
        schema=INSTANTS,
    )
    return table, rows


def device_from_pid(pid: str) -> str:
    """A device's name from the pid of its executions when the trace names none: Kineto writes a GPU's
    kernels, copies and sets under pid = the device index (libkineto CuptiActivity: deviceId())."""
    return f"GPU {pid}" if natural(pid)[0] == 0 else f"device {pid}"


def natural(text: str) -> tuple[int, int | str]:
    """Sort numbers numerically and before words."""
    try:
        return (0, int(text))
    except ValueError:
        return (1, text)
