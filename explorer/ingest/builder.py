"""TraceBuilder: the one sink every parser writes into, and the step that turns raw events into tables.

Parsers only decode their format and call `add_*`; nesting, track layout, cross-lane links and
the op table are computed here once, columnar, for every format alike.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.op_stats import compute_op_stats
from explorer.ingest.chrome.gather import take_text
from explorer.ingest.chrome.spill import OrderedArgs, Segment, SpilledArgs, read_segments
from explorer.ingest.columns import (
    CODED_FIELDS,
    KINDS,
    NONE,
    ROW_FLOW_CODES,
    TEXT_CODES,
    FlowPoints,
    SliceChunk,
    SliceColumns,
    as_codes,
    concat_chunks,
    lane_values,
    rule_columns,
)
from explorer.ingest.limits import IngestLimits
from explorer.ingest.linked import Linked, LinkedParts, link_slices, track_order
from explorer.ingest.links import flow_kind_index
from explorer.ingest.tracks import ThreadBook, counter_tables, instant_tables
from explorer.model.lanes import (
    LANE_ORDER,
    FlowKind,
    Lane,
    rule_for,
)
from explorer.model.markers import marker_mask
from explorer.model.split import CPU_KEY, SPLIT_KEY, TimeSplit
from explorer.model.tables import (
    FLOWS,
    SLICES,
    TRACKS,
    IngestedTrace,
    Warning_,
)
from explorer.native.memory import release, roomy_heap

log = logging.getLogger(__name__)

# of the ingest's memory budget: the args put in slice order at the write hold twice this at most (a bucket read
# back and its reordered copy), on top of the finished tables; past it they go through bucket files on disk.
# A bucket's pages count in the write's peak, which is the ingest's: 1/64 (23 MiB at the default 1,500 MB) put
# the 1M-event file's peak at 314-323 MiB, 1/256 at 295, in the same time (alternating runs; docs/benchmarks.md, ninth round).
ARGS_ORDER_SHARE = 1 / 256

# SliceChunk's fields in the order add_slice stores a row: six ints, two flags, four texts
ROW_FIELDS = ("thread", "lane", "ts", "dur", "corr", "ext", "is_op", "devtime", "name", "cat", "args", "shapes")
SliceRow = tuple[int, int, int, int, int, int, bool, bool, str, str, str, str]
Ext = TypeVar("Ext")


@dataclass(frozen=True)
class RawSlices:
    """A read-only snapshot of the raw slice columns, for steps that join files before finish()
    (e.g. linking Neuron system events to a framework trace). Lists are shared, not copied."""

    thread: np.ndarray  # raw thread index per slice
    thread_src: np.ndarray  # source index per raw thread
    lane: np.ndarray  # LANE_ORDER value per slice
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    is_op: np.ndarray
    external_id: np.ndarray
    name: list[str]
    cat: list[str]
    args: list[str]


@dataclass
class _FlowPoint:
    raw_thread: int
    ts_ns: int
    phase: str  # s | t | f
    enclosing: bool  # bind to the enclosing slice (else: the next slice to start)
    order: int


EXTRA_TABLES = "tables"  # the extensions' key of add_table's tables


class TraceBuilder:
    """Accumulates raw events from parsers (row at a time, into plain lists) and builds the tables."""

    def __init__(self, limits: IngestLimits | None = None) -> None:
        self.limits = limits or IngestLimits()
        self.sources: list[str] = []
        self.threads = ThreadBook()
        self.instances = self.threads.instances  # source -> instance label; parsers may set it
        self.warnings: dict[tuple[str, str, str], Warning_] = {}
        self.meta: dict[str, object] = {}
        self.thread = self.threads.thread  # per event: bound once
        # row-wise slices, one tuple each in ROW_FIELDS order: one append per event, columns once at the end
        self._rows: list[SliceRow] = []
        # counters: series key -> (ts list, value list)
        self._counters: dict[tuple[int, str, str], tuple[list[int], list[float]]] = {}
        self._counter_lane: dict[tuple[int, str, str], str] = {}
        # instants
        self._instants: list[tuple[int, int, str, str, str]] = []
        # flows
        self._flow_points: dict[tuple[int, str, str], list[_FlowPoint]] = defaultdict(list)
        self._links: list[tuple[int, int, str]] = []
        # bulk (columnar) input: slice chunks come before the row-at-a-time lists in raw order
        self._chunks: list[SliceChunk] = []
        self._chunk_rows = 0
        self._bulk_flows = FlowPoints()
        self._flow_codes: dict[tuple[int, str, str], int] = {}
        self._bulk_codes = 0
        # per-format state that must outlive one parser call (e.g. Neuron link keys joined across files)
        self.extensions: dict[str, object] = {}
        self.split = TimeSplit(release)  # where finish() and the parsers spend their time (run meta)
        self._linked = LinkedParts()  # merged parts' own nesting and links (explorer.ingest.linked)

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
        self.threads.process_names[(src, str(pid))] = name

    def set_thread_name(self, src: int, pid: object, tid: object, name: str) -> None:
        self.threads.thread_names[(src, str(pid), str(tid))] = name

    def set_process_sort(self, src: int, pid: object, index: int) -> None:
        self.threads.process_sort[(src, str(pid))] = index

    def set_thread_sort(self, src: int, pid: object, tid: object, index: int) -> None:
        self.threads.thread_sort[(src, str(pid), str(tid))] = index

    def set_device(self, src: int, pid: object, device: str) -> None:
        """Mark a process as a device (its threads are streams / cores), e.g. Kineto's GPU pids."""
        self.threads.devices[(src, str(pid))] = device

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
        self._rows.append((thread, LANE_ORDER[lane or rule.lane], ts_ns, dur_ns, correlation, external_id,
                           rule.is_op, rule.device_time, name, cat, args, shapes))
        return self._chunk_rows + len(self._rows) - 1

    def add_slice_columns(self, thread: np.ndarray, cat: pa.Array, name: pa.Array, ts_ns: np.ndarray,
                          dur_ns: np.ndarray, args: pa.Array | SpilledArgs, correlation: np.ndarray,
                          external_id: np.ndarray, shapes: pa.Array) -> None:
        """Bulk form of add_slice for columnar parsers. Rows added one by one before it (another file of
        the run: a capture folder's Neuron system profile before its big framework trace) become a chunk
        first, so every raw index handed out so far keeps its place. `args` may be on disk already
        (SpilledArgs, in raw order): finish() then leaves them there for the store."""
        if self._rows:
            self._chunks.append(self._rows_chunk())
            self._chunk_rows += len(self._rows)
            self._rows = []
        cat = as_codes(cat)
        lane, is_op, devtime = rule_columns(cat)
        self._chunks.append(SliceChunk(
            thread=thread.astype(np.int64, copy=False), lane=lane, ts=ts_ns.astype(np.int64, copy=False),
            dur=dur_ns.astype(np.int64, copy=False),
            corr=correlation.astype(np.int64, copy=False), ext=external_id.astype(np.int64, copy=False), is_op=is_op,
            devtime=devtime,
            name=name, cat=cat, args=args, shapes=shapes))
        self._chunk_rows += len(ts_ns)

    def flow_code(self, src: int, cat: str, flow_id: str) -> int:
        """A code per distinct flow (source, category, id) for row-wise flow steps."""
        key = (src, cat, flow_id)
        code = self._flow_codes.get(key)
        if code is None:
            code = self._flow_codes[key] = ROW_FLOW_CODES + len(self._flow_codes)
        return code

    def reserve_flow_codes(self, n: int) -> int:
        """A block of n fresh flow codes for a bulk parser (which numbers its distinct flows itself)."""
        base = self._bulk_codes
        self._bulk_codes += n
        return base

    def add_flow_points_columns(self, codes: np.ndarray, kinds: np.ndarray, thread: np.ndarray, ts_ns: np.ndarray,
                                enclosing: np.ndarray) -> None:
        """Bulk flow steps: `codes` from flow_code(), `kinds` index into columns.KINDS."""
        self._bulk_flows.add(codes, kinds, thread, ts_ns, enclosing)

    def add_counter(self, src: int, pid: object, series: str, ts_ns: int, value: float,
                    lane: Lane = Lane.COUNTER) -> None:
        pts = self._series(src, pid, series, lane)
        pts[0].append(ts_ns)
        pts[1].append(value)

    def add_counter_points(self, src: int, pid: object, series: str, ts_ns: list[int], values: list[float],
                           lane: Lane = Lane.COUNTER) -> None:
        """Several points of one series at once, in order (as add_counter called for each)."""
        if ts_ns:
            pts = self._series(src, pid, series, lane)
            pts[0].extend(ts_ns)
            pts[1].extend(values)

    def _series(self, src: int, pid: object, series: str, lane: Lane) -> tuple[list[int], list[float]]:
        key = (src, str(pid), series)
        pts = self._counters.get(key)
        if pts is None:
            pts = self._counters[key] = ([], [])
            self._counter_lane[key] = lane.value
        return pts

    def add_table(self, name: str, table: pa.Table) -> None:
        """A table of the run beside the timeline's (an allocator snapshot's: explorer.ingest.alloc_snapshot),
        appended to one of the same name; finish() returns them as they are. (Kept in `extensions`: only the
        main process's parsers add them, so a part never carries one.)"""
        extra = self._extra_tables()
        extra[name] = pa.concat_tables([extra[name], table]) if name in extra else table

    def _extra_tables(self) -> dict[str, pa.Table]:
        extra = self.extensions.setdefault(EXTRA_TABLES, {})
        assert isinstance(extra, dict)
        return extra

    def add_instant(self, thread: int, ts_ns: int, name: str, cat: str, args: str = "{}") -> None:
        self._instants.append((thread, ts_ns, name, cat, args))

    def add_flow_point(self, src: int, flow_id: str, cat: str, phase: str, thread: int, ts_ns: int,
                       enclosing: bool) -> None:
        points = self._flow_points[(src, cat, flow_id)]
        points.append(_FlowPoint(thread, ts_ns, phase, enclosing, len(points)))

    def add_link(self, from_raw: int, to_raw: int, kind: FlowKind) -> None:
        """An explicit link between two slices already added (their raw indices)."""
        self._links.append((from_raw, to_raw, kind.value))

    def extension(self, key: str, kind: type[Ext]) -> Ext:
        """Per-build state a parser keeps across files (one `kind()` per key, made on first use)."""
        state = self.extensions.get(key)
        if not isinstance(state, kind):
            state = kind()
            self.extensions[key] = state
        return state

    @property
    def slice_count(self) -> int:
        return self._chunk_rows + len(self._rows)

    def categories(self) -> set[str]:
        """The distinct slice categories seen so far (cheap: no per-slice Python objects)."""
        cats = {row[9] for row in self._rows}  # ROW_FIELDS[9] == "cat"
        for chunk in self._chunks:
            cats.update(pc.unique(chunk.cat).to_pylist())
        return cats

    def _columns(self) -> SliceColumns:
        """Every raw slice (bulk chunks, then row-wise ones), as columns."""
        return concat_chunks([*self._chunks, self._rows_chunk()])

    def _cut_names(self, names: pa.ChunkedArray) -> pa.ChunkedArray:
        """Names longer than the limit, cut to it (and counted in a warning)."""
        limit, n, chunks = self.limits.max_name_chars, 0, []
        for chunk in names.chunks:  # TEXT_CODES: each distinct name is looked at once, and cut once
            values = chunk.dictionary
            too_long = pc.greater(pc.utf8_length(values), limit)
            if pc.any(too_long).as_py():
                n += pc.sum(too_long.take(chunk.indices)).as_py() or 0
                chunk = pa.DictionaryArray.from_arrays(
                    chunk.indices, pc.if_else(too_long, pc.utf8_slice_codeunits(values, 0, limit), values))
            chunks.append(chunk)
        if not n:
            return names
        self.warn("long_name", f"slice names longer than {limit:,} characters (cut; EXPLORER_MAX_NAME_CHARS)", n)
        return pa.chunked_array(chunks, names.type)

    def _rows_chunk(self) -> SliceChunk:
        """The row-wise slices so far as one chunk."""
        cols = dict(zip(ROW_FIELDS, zip(*self._rows, strict=True), strict=True)) if self._rows else {
            f: () for f in ROW_FIELDS}
        ints = {f: np.asarray(cols[f], dtype=np.int64) for f in ROW_FIELDS[:6]}
        texts = {f: pa.array(cols[f], pa.string()) for f in ROW_FIELDS[8:]}
        return SliceChunk(**ints, is_op=np.asarray(cols["is_op"], dtype=bool),
                          devtime=np.asarray(cols["devtime"], dtype=bool), **texts)

    def thread_key(self, thread: int) -> tuple[int, str, str]:
        """(source, pid, tid) of a raw thread index."""
        info = self.threads.info[thread]
        return info.src, info.pid, info.tid

    def raw_slices(self) -> RawSlices:
        cols = self._columns()
        return RawSlices(
            thread=cols.thread,
            thread_src=np.asarray([t.src for t in self.threads.info], dtype=np.int64),
            lane=cols.lane, ts_ns=cols.ts, dur_ns=cols.dur, is_op=cols.is_op, external_id=cols.ext,
            name=cols.name.to_pylist(), cat=cols.cat.to_pylist(),
            args=(cols.args if isinstance(cols.args, pa.ChunkedArray) else read_segments(cols.args)).to_pylist(),
        )

    def shift_sources(self, srcs: set[int], delta_ns: int) -> None:
        """Move every event of these sources by delta_ns (clock alignment across files)."""
        if not srcs or delta_ns == 0:
            return
        threads = {i for i, t in enumerate(self.threads.info) if t.src in srcs}
        moved = np.zeros(len(self.threads.info), dtype=bool)
        moved[list(threads)] = True
        for chunk in self._chunks:
            chunk.ts = chunk.ts + np.where(moved[chunk.thread], delta_ns, 0)
        bulk = self._bulk_flows
        bulk.ts = [ts + np.where(moved[th], delta_ns, 0) for ts, th in zip(bulk.ts, bulk.thread, strict=True)]
        self._rows = [(r[0], r[1], r[2] + delta_ns, *r[3:]) if r[0] in threads else r
                      for r in self._rows]
        self._instants = [(th, ts + delta_ns if th in threads else ts, name, cat, args)
                          for th, ts, name, cat, args in self._instants]
        for (src, _pid, _series), (ts_list, _vals) in self._counters.items():
            if src in srcs:
                ts_list[:] = [ts + delta_ns for ts in ts_list]
        for (src, _cat, _fid), points in self._flow_points.items():
            if src in srcs:
                for p in points:
                    p.ts_ns += delta_ns

    # ---- build -------------------------------------------------------------------------------

    def finish(self) -> IngestedTrace:
        with roomy_heap():  # (its steps' per-slice arrays reuse the heap's pages: explorer.native.memory)
            tables, slice_args = self._tables()
        slices, split = tables["slices"], self.split
        op_stats, op_stats_by_shape = _op_tables_beside(slices, tables["flows"], split)
        self.meta[SPLIT_KEY], self.meta[CPU_KEY] = split.ns, split.cpu  # (the op table's step is added when done)
        return IngestedTrace(
            tables={**tables, "op_stats": op_stats, "op_stats_by_shape": op_stats_by_shape, **self._extra_tables()},
            warnings=sorted(self.warnings.values(), key=lambda w: (-w.count, w.code)),
            meta=self.meta, slice_args=slice_args,
        )

    def _tables(self) -> tuple[dict[str, pa.Table], OrderedArgs | None]:
        """finish()'s steps before the op table: the tables but the op tables, and the args in order when
        they are on disk."""
        lim, where, split = self.limits, ", ".join(self.sources)[:200] or "the trace", self.split
        lim.check("the trace holds events:", self.slice_count, lim.max_events, "EXPLORER_MAX_EVENTS", where)
        joined = self._linked.covers(self.slice_count, self.link_marks())
        with split.step("columns"):
            cols = self._columns()
            self._chunks = []  # cols holds the only reference now: freed as soon as the tables are built
            cols.name = self._cut_names(cols.name)
        tracks = None
        if joined:  # every slice came from a part that linked itself: join the parts' results
            with split.step("links"):
                linked = self._linked.joined()
                tracks = self._linked.tracks()
        else:
            linked = self.link(cols, split)
        self._linked = LinkedParts()
        self._bulk_flows = FlowPoints()  # bound to slices now (linked.flows): a build is finished once
        with split.step("nesting"):
            if linked.displaced:
                self.warn("overlap", "slices overlapping without nesting on one thread were put on a sub-row",
                          linked.displaced)
            track_keys, raw_track = self.threads.layout(cols.thread, cols.lane, linked.sub_row, tracks)
            del tracks
            lim.check("the trace has tracks (threads x lanes):", len(track_keys), lim.max_tracks,
                      "EXPLORER_MAX_TRACKS", where)
            depth = linked.depth
            lim.check("slices nest this deep:", int(depth.max()) + 1 if len(depth) else 0, lim.max_depth,
                      "EXPLORER_MAX_DEPTH", where)
        if linked.flows.unbound:
            self.warn("flow_unbound", "flow steps whose end could not be bound to a slice", linked.flows.unbound)
        if linked.flows.lone:
            self.warn("flow_unpaired", "flow steps without a partner (a start without its end, or an end without its "
                      "start): not drawn", linked.flows.lone)
        flows_from, flows_to, flows_kind, op_id = linked.flows.frm, linked.flows.to, linked.flows.kind, linked.op_id
        parent, by_track = linked.parent, linked.by_track
        del linked

        with split.step("sort"):  # final order: by track, then time; slice_id is the position in that order
            order = track_order(by_track, raw_track, cols.ts, cols.dur)
            del by_track
            remap = _Renumber(order)
            raw_args = cols.args
            # each raw column is dropped as its final one is made (cols is ours alone: see above)
            slices = _slices_table(cols, order, remap, raw_track, depth, parent, op_id)
            del cols, parent, op_id
            slice_args = None if isinstance(raw_args, pa.ChunkedArray) else OrderedArgs(
                raw_args, order, _spill_folder(raw_args), int(lim.memory_mb * 2**20 * ARGS_ORDER_SHARE))
            del raw_args
            ts, dur = slices.column("ts_ns").to_numpy(), slices.column("dur_ns").to_numpy()
        with split.step("tracks"):
            flows = pa.table({
                "flow_id": np.arange(len(flows_from), dtype=np.int64),
                "from_slice": remap(flows_from),
                "to_slice": remap(flows_to),
                "kind": pa.array(np.asarray(KINDS, dtype=object)[flows_kind], pa.string()),
            }, schema=FLOWS)
            tracks_rows = self.threads.slice_track_rows(track_keys, raw_track, depth)
            counters, counter_tracks = counter_tables(self.threads, self._counters, self._counter_lane,
                                                      len(tracks_rows))
            instants, instant_tracks = instant_tables(self.threads, self._instants,
                                                      len(tracks_rows) + len(counter_tracks))
            tracks = pa.Table.from_pylist(tracks_rows + counter_tracks + instant_tracks, schema=TRACKS)
            self._span_meta(ts, dur, counters, instants, marker_mask("slice", slices.column("cat"),
                                                                     slices.column("name")))
        # (the per-slice arrays above go with this frame, before the op table's are made)
        return {"tracks": tracks, "slices": slices, "flows": flows, "counters": counters,
                "instants": instants}, slice_args

    # ---- steps of finish() ---------------------------------------------------------------------

    def _flow_points_columns(self) -> tuple[np.ndarray, ...]:
        """Row-wise flow points joined to the bulk ones: (code, kind, thread, ts, enclosing)."""
        bulk = self._bulk_flows
        codes, kinds, threads, tss, encs = (list(bulk.key), list(bulk.kind), list(bulk.thread), list(bulk.ts),
                                            list(bulk.enclosing))
        for (src, cat, fid), points in self._flow_points.items():
            code = self.flow_code(src, cat, fid)
            codes.append(np.full(len(points), code, dtype=np.int64))
            kinds.append(np.full(len(points), flow_kind_index(cat), dtype=np.int8))
            threads.append(np.asarray([p.raw_thread for p in points], dtype=np.int64))
            tss.append(np.asarray([p.ts_ns for p in points], dtype=np.int64))
            encs.append(np.asarray([p.enclosing or p.phase != "f" for p in points], dtype=bool))
        if not codes:
            empty = np.zeros(0, np.int64)
            return empty, empty.astype(np.int8), empty, empty, empty.astype(bool)
        return (np.concatenate(codes), np.concatenate(kinds), np.concatenate(threads), np.concatenate(tss),
                np.concatenate(encs))

    def link(self, cols: SliceColumns | None = None, split: TimeSplit | None = None) -> Linked:
        """Nesting, flows and op attribution of the raw slices (explorer.ingest.linked); hands out flow codes
        to the row-wise flow steps that have none yet."""
        cols = cols if cols is not None else self._columns()
        explicit = (np.asarray([x[0] for x in self._links], dtype=np.int64),
                    np.asarray([x[1] for x in self._links], dtype=np.int64),
                    np.asarray([KINDS.index(x[2]) for x in self._links], dtype=np.int8))
        return link_slices(cols, self._thread_src(), explicit, self._flow_points_columns(), split)

    def link_marks(self) -> tuple[int, ...]:
        """The sizes of what linking reads: merged parts' results hold while these stay as they were."""
        return (self.slice_count, len(self._links), len(self._bulk_flows),
                sum(len(points) for points in self._flow_points.values()))

    def _thread_src(self) -> np.ndarray:
        return np.asarray([t.src for t in self.threads.info] or [0], dtype=np.int64)

    def _span_meta(self, ts: np.ndarray, dur: np.ndarray, counters: pa.Table, instants: pa.Table,
                   slice_markers: np.ndarray) -> None:
        """The run's span: first to last real event (start_ns, end_ns); profiler bookkeeping markers
        (explorer.model.markers) count only in the extent of all data (extent_start_ns, extent_end_ns),
        which the span falls back to when there is nothing else."""
        real: list[tuple[np.ndarray, np.ndarray]] = []
        marks: list[tuple[np.ndarray, np.ndarray]] = []
        end = ts + dur
        real.append((ts[~slice_markers], end[~slice_markers]))
        marks.append((ts[slice_markers], end[slice_markers]))
        if counters.num_rows:
            col = counters.column("ts_ns").to_numpy()
            real.append((col, col))
        if instants.num_rows:
            col = instants.column("ts_ns").to_numpy()
            is_mark = marker_mask("instant", instants.column("cat"), instants.column("name"))
            real.append((col[~is_mark], col[~is_mark]))
            marks.append((col[is_mark], col[is_mark]))
        extent = _bounds(real + marks)
        start, stop = _bounds(real) or extent or (0, 0)
        self.meta["start_ns"], self.meta["end_ns"] = start, stop
        self.meta["extent_start_ns"], self.meta["extent_end_ns"] = extent or (0, 0)
        self.meta["sources"] = list(self.sources)


def _bounds(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[int, int] | None:
    """(earliest start, latest end) over (starts, ends) pairs; None when all are empty."""
    found = [(int(a.min()), int(b.max())) for a, b in parts if len(a)]
    return (min(f[0] for f in found), max(f[1] for f in found)) if found else None


class _Renumber:
    """Raw slice index -> final slice id (position in track/time order); a negative one (NONE) -> NONE. The
    table has one more entry, NONE, which index -1 reads: one gather, no mask (2.3M slices' parents, ops and
    flow ends: 0.19 -> 0.03-0.12 s)."""

    def __init__(self, order: np.ndarray) -> None:
        self.new_id = np.empty(len(order) + 1, dtype=np.int64)
        self.new_id[order] = np.arange(len(order), dtype=np.int64)
        self.new_id[-1] = NONE

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.new_id[np.maximum(ids, NONE)]
        return out


def _spill_folder(segments: list[Segment]) -> Path:
    """Where the spilled args live (the run's scratch folder): the final reordering writes beside them."""
    return next(s.path.parent for s in segments if isinstance(s, SpilledArgs))


# In memory, lane, cat, name and shapes are dictionary columns (a code per slice, not a string: ~160 MB less at
# the peak of a 10M-event ingest for lane and cat; name and shapes, 24 MiB of the 1M-event file's 72 MiB slices
# table as text, 5 as codes); the store writes them as the strings of SLICES (explorer.store.runs casts each row
# group). Args, unique per slice, stay text.
LANE_TYPE = pa.dictionary(pa.int8(), pa.string())
SLICES_IN_MEMORY = pa.schema([
    pa.field(f.name, LANE_TYPE if f.name == "lane" else TEXT_CODES if f.name in CODED_FIELDS else f.type)
    for f in SLICES])
SLICES_WITHOUT_ARGS = pa.schema([f for f in SLICES_IN_MEMORY if f.name != "args"])


def _slices_table(cols: SliceColumns, order: np.ndarray, remap: _Renumber, raw_track: np.ndarray,
                  depth: np.ndarray, parent: np.ndarray, op_id: np.ndarray) -> pa.Table:
    """The slices table in final order; without `args` when they are on disk (IngestedTrace.slice_args).
    Consumes `cols`: each raw column is emptied once its final column is made, so the finish holds the raw
    and the final form of one column at a time, not of all of them (the 10M-event ingest's peak)."""
    take = pa.array(order)
    empty_ints, empty_text = np.zeros(0, np.int64), pa.chunked_array([], pa.string())

    def ints(attr: str) -> np.ndarray:
        out: np.ndarray = getattr(cols, attr)[order]
        setattr(cols, attr, empty_ints)
        return out

    def text(attr: str) -> pa.ChunkedArray:
        out = take_text(getattr(cols, attr), order)
        setattr(cols, attr, empty_text)
        return out

    def nullable(attr: str) -> pa.Array:
        values = ints(attr)
        return pa.array(values, pa.int64(), mask=values < 0)

    def codes(attr: str) -> pa.DictionaryArray:
        out = _dictionary(getattr(cols, attr), take)
        setattr(cols, attr, empty_text)
        return out

    lane = pa.DictionaryArray.from_arrays(pa.array(ints("lane").astype(np.int8)), pa.array(lane_values(), pa.string()))
    columns = {
        "slice_id": np.arange(len(order), dtype=np.int64),
        "track_id": raw_track[order].astype(np.int32),
        "ts_ns": ints("ts"),
        "dur_ns": ints("dur"),
        "depth": depth[order].astype(np.int32),
        "parent_id": remap(parent)[order],
        "name": codes("name"),
        "cat": codes("cat"),
        "lane": lane,
        "correlation": nullable("corr"),
        "external_id": nullable("ext"),
        "op_id": remap(op_id)[order],
        "is_op": ints("is_op"),
        "device_time": ints("devtime"),
        "shapes": codes("shapes"),
    }
    del lane
    if isinstance(cols.args, pa.ChunkedArray):
        return pa.table({**columns, "args": text("args")}, schema=SLICES_IN_MEMORY)
    return pa.table(columns, schema=SLICES_WITHOUT_ARGS)


def _dictionary(texts: pa.ChunkedArray, take: pa.Array) -> pa.DictionaryArray:
    """texts[take] (TEXT_CODES, each chunk with its own values) as one dictionary column whose dictionary is the
    values it uses, sorted: so the same values give the same column whatever chunks they came in (the parser
    paths' tables compare equal). The chunks' dictionaries are unified: no copy of the strings."""
    unified = texts.unify_dictionaries()
    taken = unified.take(take)
    values = unified.chunk(0).dictionary if unified.num_chunks else pa.array([], pa.string())
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in taken.chunks] or
                           [np.zeros(0, np.int32)])
    used = np.flatnonzero(np.bincount(codes, minlength=len(values)))
    by_value = used[np.asarray(pc.array_sort_indices(values.take(pa.array(used))))]
    recode = np.zeros(len(values), dtype=np.int32)
    recode[by_value] = np.arange(len(by_value), dtype=np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(recode[codes]), values.take(pa.array(by_value)))


def _op_tables_beside(slices: pa.Table, flows: pa.Table,
                      split: TimeSplit) -> tuple[Future[pa.Table], Future[pa.Table]]:
    """The op tables (by name, by name and shape), made on a thread of their own: the store writes the slices
    table meanwhile (Parquet encodes outside the GIL), and reading either table waits for it (Tables)."""
    by_name: Future[pa.Table] = Future()
    by_shape: Future[pa.Table] = Future()

    def make() -> None:
        try:
            with split.step("op_table"):
                tables = compute_op_stats(slices, flows)
        except BaseException as exc:
            by_name.set_exception(exc)
            by_shape.set_exception(exc)
        else:
            by_name.set_result(tables[0])
            by_shape.set_result(tables[1])

    threading.Thread(target=make, name="op-tables").start()
    return by_name, by_shape

