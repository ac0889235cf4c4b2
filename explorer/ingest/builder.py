"""TraceBuilder: the one sink every parser writes into, and the step that turns raw events into tables.

Parsers only decode their format and call `add_*`; nesting, track layout, cross-lane links and
the op table are computed here once, columnar, for every format alike.
"""

from __future__ import annotations

import bisect
import logging
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from explorer.analysis.nesting import compute_nesting, count_same_track_ancestors, nearest_ancestor_where
from explorer.analysis.ops import compute_op_stats
from explorer.model.lanes import (
    EXECUTE_FLOW_CATEGORIES,
    FWDBWD_FLOW_CATEGORIES,
    LANE_ORDER,
    FlowKind,
    Lane,
    rule_for,
)
from explorer.model.tables import (
    COUNTERS,
    FLOWS,
    INSTANTS,
    SLICES,
    TRACKS,
    IngestedTrace,
    Warning_,
)

log = logging.getLogger(__name__)

NONE = -1  # "no value" in integer id columns; nullable columns use Arrow nulls instead


@dataclass
class _Thread:
    src: int
    pid: str
    tid: str


@dataclass
class _FlowPoint:
    raw_thread: int
    ts_ns: int
    phase: str  # s | t | f
    enclosing: bool  # bind to the enclosing slice (else: the next slice to start)
    order: int


class TraceBuilder:
    """Accumulates raw events from parsers (row at a time, into plain lists) and builds the tables."""

    def __init__(self) -> None:
        self.sources: list[str] = []
        self.instances: dict[int, str] = {}
        self.warnings: dict[tuple[str, str, str], Warning_] = {}
        self.meta: dict[str, object] = {}
        self._threads: dict[tuple[int, str, str], int] = {}
        self._thread_info: list[_Thread] = []
        self._process_names: dict[tuple[int, str], str] = {}
        self._thread_names: dict[tuple[int, str, str], str] = {}
        self._process_sort: dict[tuple[int, str], int] = {}
        self._thread_sort: dict[tuple[int, str, str], int] = {}
        self._devices: dict[tuple[int, str], str] = {}
        # raw slice columns
        self._s_thread: list[int] = []
        self._s_lane: list[int] = []
        self._s_ts: list[int] = []
        self._s_dur: list[int] = []
        self._s_name: list[str] = []
        self._s_cat: list[str] = []
        self._s_args: list[str] = []
        self._s_corr: list[int] = []
        self._s_ext: list[int] = []
        self._s_shapes: list[str] = []
        self._s_is_op: list[bool] = []
        self._s_devtime: list[bool] = []
        # counters: series key -> (ts list, value list)
        self._counters: dict[tuple[int, str, str], tuple[list[int], list[float]]] = {}
        self._counter_lane: dict[tuple[int, str, str], str] = {}
        # instants
        self._instants: list[tuple[int, int, str, str, str]] = []
        # flows
        self._flow_points: dict[tuple[int, str, str], list[_FlowPoint]] = defaultdict(list)
        self._links: list[tuple[int, int, str]] = []

    # ---- parser-facing API -------------------------------------------------------------------

    def add_source(self, label: str, instance: str = "") -> int:
        self.sources.append(label)
        src = len(self.sources) - 1
        self.instances[src] = instance
        return src

    def warn(self, code: str, message: str, count: int = 1, source: str = "") -> None:
        key = (code, message, source)
        if key in self.warnings:
            self.warnings[key].count += count
        else:
            self.warnings[key] = Warning_(code=code, message=message, count=count, source=source)

    def set_process_name(self, src: int, pid: object, name: str) -> None:
        self._process_names[(src, str(pid))] = name

    def set_thread_name(self, src: int, pid: object, tid: object, name: str) -> None:
        self._thread_names[(src, str(pid), str(tid))] = name

    def set_process_sort(self, src: int, pid: object, index: int) -> None:
        self._process_sort[(src, str(pid))] = index

    def set_thread_sort(self, src: int, pid: object, tid: object, index: int) -> None:
        self._thread_sort[(src, str(pid), str(tid))] = index

    def set_device(self, src: int, pid: object, device: str) -> None:
        """Mark a process as a device (its threads are streams / cores), e.g. Kineto's GPU pids."""
        self._devices[(src, str(pid))] = device

    def thread(self, src: int, pid: object, tid: object) -> int:
        key = (src, str(pid), str(tid))
        idx = self._threads.get(key)
        if idx is None:
            idx = len(self._thread_info)
            self._threads[key] = idx
            self._thread_info.append(_Thread(src, key[1], key[2]))
        return idx

    def add_slice(
        self,
        thread: int,
        cat: str,
        name: str,
        ts_ns: int,
        dur_ns: int,
        args: str = "{}",
        correlation: int = NONE,
        external_id: int = NONE,
        shapes: str = "",
        lane: Lane | None = None,
    ) -> int:
        rule = rule_for(cat)
        self._s_thread.append(thread)
        self._s_lane.append(LANE_ORDER[lane or rule.lane])
        self._s_ts.append(ts_ns)
        self._s_dur.append(dur_ns)
        self._s_name.append(name)
        self._s_cat.append(cat)
        self._s_args.append(args)
        self._s_corr.append(correlation)
        self._s_ext.append(external_id)
        self._s_shapes.append(shapes)
        self._s_is_op.append(rule.is_op)
        self._s_devtime.append(rule.device_time)
        return len(self._s_ts) - 1

    def add_counter(self, src: int, pid: object, series: str, ts_ns: int, value: float,
                    lane: Lane = Lane.COUNTER) -> None:
        key = (src, str(pid), series)
        pts = self._counters.get(key)
        if pts is None:
            pts = self._counters[key] = ([], [])
            self._counter_lane[key] = lane.value
        pts[0].append(ts_ns)
        pts[1].append(value)

    def add_instant(self, thread: int, ts_ns: int, name: str, cat: str, args: str = "{}") -> None:
        self._instants.append((thread, ts_ns, name, cat, args))

    def add_flow_point(self, src: int, flow_id: str, cat: str, phase: str, thread: int, ts_ns: int,
                       enclosing: bool) -> None:
        points = self._flow_points[(src, cat, flow_id)]
        points.append(_FlowPoint(thread, ts_ns, phase, enclosing, len(points)))

    def add_link(self, from_raw: int, to_raw: int, kind: FlowKind) -> None:
        """An explicit link between two slices already added (their raw indices)."""
        self._links.append((from_raw, to_raw, kind.value))

    @property
    def slice_count(self) -> int:
        return len(self._s_ts)

    # ---- build -------------------------------------------------------------------------------

    def finish(self) -> IngestedTrace:
        n = len(self._s_ts)
        thread = np.asarray(self._s_thread, dtype=np.int64)
        lane = np.asarray(self._s_lane, dtype=np.int64)
        ts = np.asarray(self._s_ts, dtype=np.int64)
        dur = np.asarray(self._s_dur, dtype=np.int64)

        nest = compute_nesting(thread, lane, ts, dur)
        if nest.displaced_rows:
            self.warn("overlap", "slices overlapping without nesting on one thread were put on a sub-row",
                      nest.displaced_rows)
        track_keys, raw_track = self._layout_tracks(thread, lane, nest.sub_row)
        depth = count_same_track_ancestors(nest.parent, raw_track)

        # final order: by track, then time; slice_id is the position in that order
        order = np.lexsort((-dur, ts, raw_track)) if n else np.zeros(0, dtype=np.int64)
        new_id = np.empty(n, dtype=np.int64)
        new_id[order] = np.arange(n, dtype=np.int64)

        def remap(ids: np.ndarray) -> np.ndarray:
            out = np.full(len(ids), NONE, dtype=np.int64)
            ok = ids >= 0
            out[ok] = new_id[ids[ok]]
            return out

        is_op = np.asarray(self._s_is_op, dtype=bool)
        devtime = np.asarray(self._s_devtime, dtype=bool)
        corr = np.asarray(self._s_corr, dtype=np.int64)
        ext = np.asarray(self._s_ext, dtype=np.int64)

        flows_from, flows_to, flows_kind = self._build_flows(thread, lane, ts, dur, nest.parent, corr)
        op_id = self._attribute_ops(thread, lane, nest.parent, is_op, ext, flows_from, flows_to, flows_kind)

        names = np.asarray(self._s_name, dtype=object)
        lane_names = np.asarray([lv.value for lv in Lane], dtype=object)
        slices = pa.table(
            {
                "slice_id": np.arange(n, dtype=np.int64),
                "track_id": raw_track[order].astype(np.int32),
                "ts_ns": ts[order],
                "dur_ns": dur[order],
                "depth": depth[order].astype(np.int32),
                "parent_id": remap(nest.parent)[order],
                "name": pa.array(names[order], pa.string()),
                "cat": pa.array(np.asarray(self._s_cat, dtype=object)[order], pa.string()),
                "lane": pa.array(lane_names[lane[order]], pa.string()),
                "correlation": pa.array(corr[order], pa.int64(), mask=corr[order] < 0),
                "external_id": pa.array(ext[order], pa.int64(), mask=ext[order] < 0),
                "op_id": remap(op_id)[order],
                "is_op": is_op[order],
                "device_time": devtime[order],
                "shapes": pa.array(np.asarray(self._s_shapes, dtype=object)[order], pa.string()),
                "args": pa.array(np.asarray(self._s_args, dtype=object)[order], pa.string()),
            },
            schema=SLICES,
        )
        flows = pa.table(
            {
                "flow_id": np.arange(len(flows_from), dtype=np.int64),
                "from_slice": remap(np.asarray(flows_from, dtype=np.int64)),
                "to_slice": remap(np.asarray(flows_to, dtype=np.int64)),
                "kind": pa.array(flows_kind, pa.string()),
            },
            schema=FLOWS,
        )
        tracks_rows = self._track_rows(track_keys, raw_track, depth)
        counters, counter_tracks = self._counter_table(len(tracks_rows))
        instants, instant_tracks = self._instant_table(len(tracks_rows) + len(counter_tracks))
        tracks = pa.Table.from_pylist(tracks_rows + counter_tracks + instant_tracks, schema=TRACKS)

        op_stats, op_stats_by_shape = compute_op_stats(slices)
        self._span_meta(ts, dur, counters, instants)
        return IngestedTrace(
            tables={
                "tracks": tracks,
                "slices": slices,
                "flows": flows,
                "counters": counters,
                "instants": instants,
                "op_stats": op_stats,
                "op_stats_by_shape": op_stats_by_shape,
            },
            warnings=sorted(self.warnings.values(), key=lambda w: (-w.count, w.code)),
            meta=self.meta,
        )

    # ---- steps of finish() ---------------------------------------------------------------------

    def _layout_tracks(
        self, thread: np.ndarray, lane: np.ndarray, sub_row: np.ndarray
    ) -> tuple[list[tuple[int, int, int]], np.ndarray]:
        """One track per (thread, lane, sub-row); track ids ordered by lane, process, thread."""
        if len(thread) == 0:
            return [], np.zeros(0, dtype=np.int64)
        combo = (thread * 8 + lane) * 4096 + sub_row
        uniq, inverse = np.unique(combo, return_inverse=True)
        keys = [(int(c // 4096 // 8), int(c // 4096 % 8), int(c % 4096)) for c in uniq]
        sort_keys = [self._track_sort_key(t, ln, sub) for t, ln, sub in keys]
        rank = sorted(range(len(keys)), key=lambda i: sort_keys[i])
        new_index = np.empty(len(keys), dtype=np.int64)
        new_index[rank] = np.arange(len(keys))
        return [keys[i] for i in rank], new_index[inverse]

    def _track_sort_key(self, t: int, ln: int, sub: int) -> tuple[object, ...]:
        info = self._thread_info[t]
        pkey = (info.src, info.pid)
        tkey = (info.src, info.pid, info.tid)
        return (ln, info.src, self._process_sort.get(pkey, 0), _natural(info.pid),
                self._thread_sort.get(tkey, 0), _natural(info.tid), sub)

    def _process_label(self, src: int, pid: str) -> str:
        return self._process_names.get((src, pid)) or f"process {pid}"

    def _track_rows(self, keys: list[tuple[int, int, int]], raw_track: np.ndarray,
                    depth: np.ndarray) -> list[dict[str, object]]:
        counts = np.bincount(raw_track, minlength=len(keys)) if len(keys) else np.zeros(0, np.int64)
        max_depth = np.zeros(len(keys), dtype=np.int64)
        if len(raw_track):
            np.maximum.at(max_depth, raw_track, depth)
        rows = []
        lanes = list(Lane)
        for i, (t, ln, sub) in enumerate(keys):
            info = self._thread_info[t]
            process = self._process_label(info.src, info.pid)
            thread_label = self._thread_names.get((info.src, info.pid, info.tid)) or f"thread {info.tid}"
            device = self._devices.get((info.src, info.pid), "")
            label = thread_label if sub == 0 else f"{thread_label} (overlap {sub})"
            rows.append({
                "track_id": i, "lane": lanes[ln].value, "kind": "slice",
                "instance": self.instances.get(info.src, ""), "process": process, "thread": info.tid,
                "label": label, "device": device, "sort_key": i, "max_depth": int(max_depth[i]),
                "count": int(counts[i]),
            })
        return rows

    def _counter_table(self, first_track: int) -> tuple[pa.Table, list[dict[str, object]]]:
        rows: list[dict[str, object]] = []
        tids: list[np.ndarray] = []
        tss: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        for i, key in enumerate(sorted(self._counters, key=lambda k: (k[0], _natural(k[1]), k[2]))):
            src, pid, series = key
            ts_list, val_list = self._counters[key]
            ts_arr = np.asarray(ts_list, dtype=np.int64)
            order = np.argsort(ts_arr, kind="stable")
            track_id = first_track + i
            rows.append({
                "track_id": track_id, "lane": self._counter_lane[key], "kind": "counter",
                "instance": self.instances.get(src, ""), "process": self._process_label(src, pid),
                "thread": "", "label": series, "device": self._devices.get((src, pid), ""),
                "sort_key": track_id, "max_depth": 0, "count": len(ts_list),
            })
            tids.append(np.full(len(ts_list), track_id, dtype=np.int32))
            tss.append(ts_arr[order])
            vals.append(np.asarray(val_list, dtype=np.float64)[order])
        if not rows:
            return COUNTERS.empty_table(), rows
        table = pa.table({"track_id": np.concatenate(tids), "ts_ns": np.concatenate(tss),
                          "value": np.concatenate(vals)}, schema=COUNTERS)
        return table, rows

    def _instant_table(self, first_track: int) -> tuple[pa.Table, list[dict[str, object]]]:
        if not self._instants:
            return INSTANTS.empty_table(), []
        by_thread = sorted({t for t, *_ in self._instants},
                           key=lambda t: self._track_sort_key(t, LANE_ORDER[Lane.OTHER], 0))
        track_of = {t: first_track + i for i, t in enumerate(by_thread)}
        rows: list[dict[str, object]] = []
        for t in by_thread:
            info = self._thread_info[t]
            count = sum(1 for it in self._instants if it[0] == t) if len(by_thread) > 1 else len(self._instants)
            rows.append({
                "track_id": track_of[t], "lane": Lane.OTHER.value, "kind": "instant",
                "instance": self.instances.get(info.src, ""), "process": self._process_label(info.src, info.pid),
                "thread": info.tid,
                "label": (self._thread_names.get((info.src, info.pid, info.tid)) or f"thread {info.tid}")
                + " (instants)",
                "device": "", "sort_key": track_of[t], "max_depth": 0, "count": count,
            })
        inst = sorted(self._instants, key=lambda it: (track_of[it[0]], it[1]))
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

    def _build_flows(self, thread: np.ndarray, lane: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                     parent: np.ndarray, corr: np.ndarray) -> tuple[list[int], list[int], list[str]]:
        """Flows from explicit links, Kineto correlation ids, and Chrome s/t/f flow events (bound)."""
        seen: set[tuple[int, int]] = set()
        f_from: list[int] = []
        f_to: list[int] = []
        f_kind: list[str] = []

        def add(a: int, b: int, kind: str) -> None:
            if a < 0 or b < 0 or a == b or (a, b) in seen:
                return
            seen.add((a, b))
            f_from.append(a)
            f_to.append(b)
            f_kind.append(kind)

        for a, b, kind in self._links:
            add(a, b, kind)

        # runtime call -> device execution by (source, correlation)
        src_of_thread = np.asarray([t.src for t in self._thread_info], dtype=np.int64)
        runtime_lane, hw_lane = LANE_ORDER[Lane.RUNTIME], LANE_ORDER[Lane.HARDWARE]
        has_corr = corr >= 0
        rt = np.nonzero(has_corr & (lane == runtime_lane))[0]
        hw = np.nonzero(has_corr & (lane == hw_lane))[0]
        if len(rt) and len(hw):
            src = src_of_thread[thread] if len(thread) else thread
            launcher = {(int(s), int(c)): int(i) for i, s, c in zip(rt, src[rt], corr[rt], strict=True)}
            for i, s, c in zip(hw.tolist(), src[hw].tolist(), corr[hw].tolist(), strict=True):
                r = launcher.get((s, c))
                if r is not None:
                    add(r, i, FlowKind.EXECUTE.value)

        if self._flow_points:
            binder = _FlowBinder(thread, ts, dur)
            unbound = 0
            for (_src, cat, _fid), points in self._flow_points.items():
                kind = (FlowKind.EXECUTE.value if cat.lower() in EXECUTE_FLOW_CATEGORIES
                        else FlowKind.FWDBWD.value if cat.lower() in FWDBWD_FLOW_CATEGORIES
                        else FlowKind.GENERIC.value)
                points.sort(key=lambda p: (p.ts_ns, p.order))
                bound = [binder.bind(p) for p in points]
                for a, b in zip(bound, bound[1:], strict=False):
                    if a < 0 or b < 0:
                        unbound += 1
                    else:
                        add(a, b, kind)
            if unbound:
                self.warn("flow_unbound", "flow steps whose end could not be bound to a slice", unbound)
        return f_from, f_to, f_kind

    def _attribute_ops(self, thread: np.ndarray, lane: np.ndarray, parent: np.ndarray, is_op: np.ndarray,
                       ext: np.ndarray, f_from: list[int], f_to: list[int], f_kind: list[str]) -> np.ndarray:
        """op_id: for runtime calls the innermost enclosing op (else the op with the same External id);
        for device executions the op of the runtime call that launched them."""
        n = len(lane)
        op_id = np.full(n, NONE, dtype=np.int64)
        if n == 0:
            return op_id
        runtime_lane, hw_lane = LANE_ORDER[Lane.RUNTIME], LANE_ORDER[Lane.HARDWARE]
        enclosing = nearest_ancestor_where(parent, is_op)
        rt_mask = lane == runtime_lane
        op_id[rt_mask] = enclosing[rt_mask]

        src_of_thread = np.asarray([t.src for t in self._thread_info], dtype=np.int64)
        src = src_of_thread[thread]
        op_idx = np.nonzero(is_op & (ext >= 0))[0]
        by_ext = {(int(s), int(e)): int(i) for i, s, e in zip(op_idx, src[op_idx], ext[op_idx], strict=True)}
        need = np.nonzero((op_id < 0) & (ext >= 0) & ((lane == runtime_lane) | (lane == hw_lane)))[0]
        for i in need.tolist():
            op_id[i] = by_ext.get((int(src[i]), int(ext[i])), NONE)

        if f_from:
            a = np.asarray(f_from, dtype=np.int64)
            b = np.asarray(f_to, dtype=np.int64)
            k = np.asarray(f_kind, dtype=object)
            ex = (k == FlowKind.EXECUTE.value) & (lane[b] == hw_lane)
            via = np.where(is_op[a[ex]], a[ex], op_id[a[ex]])
            got = via >= 0
            op_id[b[ex][got]] = via[got]
        return op_id

    def _span_meta(self, ts: np.ndarray, dur: np.ndarray, counters: pa.Table, instants: pa.Table) -> None:
        starts = [int(ts.min())] if len(ts) else []
        ends = [int((ts + dur).max())] if len(ts) else []
        for table in (counters, instants):
            if table.num_rows:
                col = table.column("ts_ns").to_numpy()
                starts.append(int(col.min()))
                ends.append(int(col.max()))
        self.meta["start_ns"] = min(starts) if starts else 0
        self.meta["end_ns"] = max(ends) if ends else 0
        self.meta["sources"] = list(self.sources)


class _FlowBinder:
    """Chrome flow binding: a step binds to the enclosing slice on its thread at its timestamp
    (`bp: "e"`, and always for starts), otherwise to the next slice that begins on that thread."""

    def __init__(self, thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
        order = np.lexsort((-dur, ts, thread))
        self._by_thread: dict[int, tuple[list[int], list[int], list[int]]] = {}
        if len(order) == 0:
            return
        th = thread[order]
        cuts = np.nonzero(np.diff(th))[0] + 1
        for chunk in np.split(order, cuts):
            t = int(thread[chunk[0]])
            self._by_thread[t] = (ts[chunk].tolist(), (ts[chunk] + dur[chunk]).tolist(), chunk.tolist())

    def bind(self, p: _FlowPoint) -> int:
        entry = self._by_thread.get(p.raw_thread)
        if entry is None:
            return NONE
        starts, ends, ids = entry
        hi = bisect.bisect_right(starts, p.ts_ns)
        if p.enclosing or p.phase == "s":
            # innermost enclosing: the latest-starting slice that still covers ts (scan back a little)
            best = NONE
            for j in range(hi - 1, max(-1, hi - 64), -1):
                if starts[j] <= p.ts_ns <= ends[j]:
                    best = ids[j]
                    break
            if best != NONE or p.enclosing:
                return best
        return ids[hi] if hi < len(ids) else NONE


def _natural(text: str) -> tuple[int, int | str]:
    """Sort numbers numerically and before words."""
    try:
        return (0, int(text))
    except ValueError:
        return (1, text)
