"""Parts: one file of a multi-file run parsed into its own TraceBuilder and written to a folder, and the merge
that appends parts to the run's builder in member order before the one finish(). It reaches into
TraceBuilder's private lists on purpose: it is its serialization. The format: docs/formats.md, "Parts"."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from explorer.errors import BadTrace
from explorer.ingest.builder import ROW_FIELDS, TraceBuilder, _FlowPoint
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome.decode import parse_chrome
from explorer.ingest.chrome.fast import parse_chrome_file
from explorer.ingest.chrome.spill import Segment, SpilledArgs
from explorer.ingest.columns import ROW_FLOW_CODES, SliceChunk, SliceColumns
from explorer.ingest.limits import IngestLimits
from explorer.ingest.linked import linked_tables
from explorer.native.memory import as_ingest_process


@dataclass
class BuilderState:
    """Everything the parsers left in a TraceBuilder before finish(), as Arrow tables (the per-event
    columns) and plain JSON-able values (the books), so that it can be written to disk by one process
    and appended to another builder by another. Raw indices (threads, slices, sources) are the
    exporting builder's own, from 0."""

    slices: pa.Table  # ROW_FIELDS, raw order (args null where books["spilled"] says they are on disk)
    bulk_flows: pa.Table  # code, kind, thread, ts, enclosing
    flow_points: pa.Table  # row-wise flow steps: src, cat, fid, thread, ts, phase, enclosing (flow by flow)
    counters: pa.Table  # src, pid, series, lane, ts, value (series by series)
    instants: pa.Table  # thread, ts, name, cat, args
    links: pa.Table  # from_raw, to_raw, kind
    books: dict[str, Any]  # sources, threads, their names and sorts, warnings, meta, flow codes
    # the part's own nesting and links (explorer.ingest.linked), when it linked itself: per slice, and flows
    linked: pa.Table | None = None
    linked_flows: pa.Table | None = None


# Every attribute of a fresh TraceBuilder and ThreadBook, each carried by export_state (or, `limits`, by the
# job; `instances` and `thread` are aliases). A test compares these with the classes: a new field fails it
# until it travels in parts too.
CARRIED_BUILDER = ("limits", "sources", "threads", "instances", "warnings", "meta", "thread", "_rows", "_counters",
                   "_counter_lane", "_instants", "_flow_points", "_links", "_chunks", "_chunk_rows", "_bulk_flows",
                   "_flow_codes", "_bulk_codes", "extensions", "split", "_linked")
CARRIED_BOOK = ("info", "_index", "process_names", "thread_names", "process_sort", "thread_sort", "devices",
                "instances", "ranks", "hosts", "label_ranks")


def _state_books(b: TraceBuilder) -> dict[str, Any]:
    t = b.threads
    return {
        "sources": list(b.sources),
        "threads": [[i.src, i.pid, i.tid] for i in t.info],
        "process_names": [[*k, v] for k, v in t.process_names.items()],
        "thread_names": [[*k, v] for k, v in t.thread_names.items()],
        "process_sort": [[*k, v] for k, v in t.process_sort.items()],
        "thread_sort": [[*k, v] for k, v in t.thread_sort.items()],
        "devices": [[*k, v] for k, v in t.devices.items()],
        "instances": [[k, v] for k, v in t.instances.items()],
        "ranks": [[k, v] for k, v in t.ranks.items()],
        "hosts": [[k, v] for k, v in t.hosts.items()],
        "label_ranks": t.label_ranks,
        "warnings": [[w.code, w.message, w.count, w.source] for w in b.warnings.values()],
        "meta": dict(b.meta),
        "flow_codes": [list(k) for k in b._flow_codes],
        "bulk_codes": b._bulk_codes,
        "split": dict(b.split.ns),
        "cpu": dict(b.split.cpu),
    }


def _spill_book(args: pa.ChunkedArray | list[Segment]) -> tuple[pa.ChunkedArray, list[list[Any]] | None]:
    """The args column of a part and, when some are on disk, its segments in raw order: [rows] for held
    ones (their text in the column), [rows, path, batch, nbytes] for spilled ones (nulls in the column)."""
    if isinstance(args, pa.ChunkedArray):
        return args, None
    column = pa.chunked_array([pa.nulls(len(seg), pa.string()) if isinstance(seg, SpilledArgs) else
                               seg.cast(pa.string()) for seg in args], pa.string())
    book = [[seg.rows, str(seg.path), seg.index, seg.nbytes] if isinstance(seg, SpilledArgs) else [len(seg)]
            for seg in args]
    return column, book


def export_state(b: TraceBuilder, link: bool = False) -> BuilderState:
    """b's raw state (see BuilderState); with `link`, also its slices nested and linked on their own (what
    finish() would derive from this file alone; its time goes to b's split). Per-format extension state
    (Neuron's cross-file link keys) does not travel: a format that keeps some is parsed in the ingest's own
    process. A part's _linked (parts merged into it) does not travel either: a part is one file."""
    if b.extensions:
        raise ValueError(f"builder state of {sorted(b.extensions)} cannot be exported")
    cols = b._columns()
    linked = _link_alone(b, cols) if link else None
    args, spilled = _spill_book(cols.args)
    # one dictionary per text column for all its batches: an Arrow IPC file cannot replace one between batches
    slices = pa.table({"thread": cols.thread, "lane": cols.lane, "ts": cols.ts, "dur": cols.dur, "corr": cols.corr,
                       "ext": cols.ext, "is_op": cols.is_op, "devtime": cols.devtime, "name": cols.name,
                       "cat": cols.cat, "args": args, "shapes": cols.shapes}).unify_dictionaries()
    bulk = b._bulk_flows
    flows = pa.table({name: _concat(parts, dtype) for name, parts, dtype in (
        ("code", bulk.key, np.int64), ("kind", bulk.kind, np.int8), ("thread", bulk.thread, np.int64),
        ("ts", bulk.ts, np.int64), ("enclosing", bulk.enclosing, np.bool_))})
    points = [(*key, p.raw_thread, p.ts_ns, p.phase, p.enclosing) for key, pts in b._flow_points.items()
              for p in pts]
    counters = [(*key, b._counter_lane[key], ts, v) for key, (tss, vs) in b._counters.items()
                for ts, v in zip(tss, vs, strict=True)]
    return BuilderState(
        slices=slices, bulk_flows=flows,
        flow_points=_rows_table(points, _POINT_TYPES),
        counters=_rows_table(counters, _COUNTER_TYPES),
        instants=_rows_table(b._instants, _INSTANT_TYPES),
        links=_rows_table(b._links, _LINK_TYPES),
        books={**_state_books(b), "spilled": spilled, **({"linked": linked[2]} if linked else {})},
        linked=linked[0] if linked else None, linked_flows=linked[1] if linked else None)


def _link_alone(b: TraceBuilder, cols: SliceColumns) -> tuple[pa.Table, pa.Table, dict[str, int]]:
    """b's slices nested and linked (explorer.ingest.linked), leaving b's flow codes as they were: the codes
    the link hands out are the merged builder's to hand out again, in its own order."""
    codes = dict(b._flow_codes)
    try:
        return linked_tables(b.link(cols, b.split), cols, len(codes))
    finally:
        b._flow_codes = codes


_POINT_TYPES = {"src": pa.int64(), "cat": pa.string(), "fid": pa.string(), "thread": pa.int64(), "ts": pa.int64(),
                "phase": pa.string(), "enclosing": pa.bool_()}
_COUNTER_TYPES = {"src": pa.int64(), "pid": pa.string(), "series": pa.string(), "lane": pa.string(),
                  "ts": pa.int64(), "value": pa.float64()}
_INSTANT_TYPES = {"thread": pa.int64(), "ts": pa.int64(), "name": pa.string(), "cat": pa.string(),
                  "args": pa.string()}
_LINK_TYPES = {"from_raw": pa.int64(), "to_raw": pa.int64(), "kind": pa.string()}


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def _rows_table(rows: Sequence[tuple[Any, ...]], types: dict[str, pa.DataType]) -> pa.Table:
    """Row tuples (fields in `types` order) as a table: the per-event lists of a builder, columnar."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in types]
    return pa.table({name: pa.array(col, typ) for (name, typ), col in zip(types.items(), columns, strict=True)})


def import_state(b: TraceBuilder, state: BuilderState) -> None:
    """Append an exported state to b, as if its parser had run in b next: sources, threads, raw slices,
    bulk flow codes and row-wise flow codes all continue b's numbering, in the exported order, so that
    finish() gives the tables a single builder fed the same files in the same order would."""
    books = state.books
    src0, thread0, row0, code0 = len(b.sources), len(b.threads.info), b.slice_count, b._bulk_codes
    _import_books(b, books, src0, thread0)
    codes = [b.flow_code(src + src0, cat, fid) for src, cat, fid in books["flow_codes"]]
    b._bulk_codes += int(books["bulk_codes"])
    _import_slices(b, state.slices, thread0, books.get("spilled"))
    _import_bulk_flows(b, state.bulk_flows, thread0, code0, codes)
    for src, cat, fid, thread, ts, phase, enclosing in zip(*_pylists(state.flow_points), strict=True):
        points = b._flow_points[(src + src0, cat, fid)]
        points.append(_FlowPoint(thread + thread0, ts, phase, enclosing, len(points)))
    for src, pid, series, lane, ts, value in zip(*_pylists(state.counters), strict=True):
        key = (src + src0, pid, series)
        b._counter_lane.setdefault(key, lane)
        pts = b._counters.setdefault(key, ([], []))
        pts[0].append(ts)
        pts[1].append(value)
    b._instants += [(th + thread0, ts, name, cat, args)
                    for th, ts, name, cat, args in zip(*_pylists(state.instants), strict=True)]
    b._links += [(f + row0, t + row0, kind) for f, t, kind in zip(*_pylists(state.links), strict=True)]
    if state.linked is not None and state.linked_flows is not None:
        b._linked.add(row0, thread0, state.linked, state.linked_flows, books["linked"])
        b._linked.marks = b.link_marks()


def _pylists(table: pa.Table) -> list[list[Any]]:
    return [col.to_pylist() for col in table.columns]


def _import_books(b: TraceBuilder, books: dict[str, Any], src0: int, thread0: int) -> None:
    t = b.threads
    b.sources += books["sources"]
    for i, (src, pid, tid) in enumerate(books["threads"]):
        if t.thread(src + src0, pid, tid) != thread0 + i:
            raise ValueError(f"thread {(src, pid, tid)} of an imported state is already in the builder")
    for field_name in ("process_names", "process_sort", "devices"):
        getattr(t, field_name).update({(src + src0, pid): v for src, pid, v in books[field_name]})
    for field_name in ("thread_names", "thread_sort"):
        getattr(t, field_name).update({(src + src0, pid, tid): v
                                       for src, pid, tid, v in books[field_name]})
    for field_name in ("instances", "ranks", "hosts"):
        getattr(t, field_name).update({src + src0: v for src, v in books[field_name]})
    t.label_ranks = t.label_ranks or bool(books["label_ranks"])
    for code, message, count, source in books["warnings"]:
        b.warn(code, message, count, source)
    b.meta.update(books["meta"])
    cpu = books.get("cpu", {})
    for step, ns in books["split"].items():  # a worker's parse adds to the run's, as the same parse here would
        b.split.add(step, int(ns), int(cpu.get(step, 0)))


def _import_slices(b: TraceBuilder, slices: pa.Table, thread0: int, spilled: list[list[Any]] | None) -> None:
    """The imported slices as chunks after b's own, one per record batch (a string column of one batch
    stays under Arrow's 2 GB offsets), or, when some args are on disk, one per exported segment (a spilled
    one points at its file again); row-wise ones first become a chunk, as in add_slice_columns, so every
    raw index handed out so far keeps its place."""
    if not slices.num_rows:
        return
    if b._rows:
        b._chunks.append(b._rows_chunk())
        b._chunk_rows += len(b._rows)
        b._rows = []
    pieces = ((batch, None) for batch in slices.to_batches()) if spilled is None else _segment_pieces(slices, spilled)
    for batch, on_disk in pieces:
        num = {f: batch.column(f).to_numpy(zero_copy_only=False) for f in ROW_FIELDS[:8]}
        num["thread"] = num["thread"] + thread0
        args: Segment = batch.column("args") if on_disk is None else on_disk
        b._chunks.append(SliceChunk(**num, name=batch.column("name"), cat=batch.column("cat"), args=args,
                                    shapes=batch.column("shapes")))
        b._chunk_rows += batch.num_rows


def _segment_pieces(slices: pa.Table,
                    spilled: list[list[Any]]) -> Iterator[tuple[pa.RecordBatch, SpilledArgs | None]]:
    """The part's slices cut at its args segments (one batch each), each with its SpilledArgs or None when
    its args are held in the column."""
    offset = 0
    for rows, *where in spilled:
        piece = slices.slice(offset, rows).combine_chunks().to_batches()
        offset += rows
        if piece:  # a segment is never empty (concat_chunks leaves empty chunks out)
            yield piece[0], SpilledArgs(Path(where[0]), int(where[1]), int(rows), int(where[2])) if where else None


def _import_bulk_flows(b: TraceBuilder, flows: pa.Table, thread0: int, code0: int, row_codes: list[int]) -> None:
    """Bulk flow steps with their codes moved into b's numbering: bulk codes after b's own block, row-wise
    codes (from flow_code) to the code b gave the same flow."""
    if not flows.num_rows:
        return
    code = flows.column("code").to_numpy()
    is_row = code >= ROW_FLOW_CODES
    moved = code + code0
    if is_row.any():
        moved[is_row] = np.asarray(row_codes, dtype=np.int64)[code[is_row] - ROW_FLOW_CODES]
    b._bulk_flows.add(moved, flows.column("kind").to_numpy(), flows.column("thread").to_numpy() + thread0,
                      flows.column("ts").to_numpy(), flows.column("enclosing").to_numpy(zero_copy_only=False))


# ---- on disk ---------------------------------------------------------------------------------------------

TABLES = ("slices", "bulk_flows", "flow_points", "counters", "instants", "links")  # BuilderState's tables
LINKED_TABLES = ("linked", "linked_flows")  # and those of a part that linked itself
BOOKS_FILE = "part.json"


@dataclass
class Part:
    """One parsed file: the builder state its parser left, the document metadata the parser returned,
    and the parser's BadTrace if it failed (the partial state is kept: a failing parser leaves it in a
    builder too, and the merge must give what one builder would)."""

    state: BuilderState
    meta: dict[str, Any] | None
    error: BadTrace | None

    def relocate(self, old_root: str, new_root: str) -> None:
        """Point the spilled args' files under `old_root` (where the part was written) to `new_root` (where its
        folder is now): the spill format stays here, not in whoever moved the folder."""
        for segment in self.state.books.get("spilled") or []:
            if len(segment) > 1 and str(segment[1]).startswith(old_root):
                segment[1] = new_root + str(segment[1])[len(old_root):]


def write_part(builder: TraceBuilder, folder: Path, meta: dict[str, Any] | None, error: BadTrace | None,
               link: bool = False) -> None:
    """The builder's state as a part folder (created; must not exist); `link` as in export_state."""
    state = export_state(builder, link)
    folder.mkdir(parents=True)
    for name in (*TABLES, *LINKED_TABLES):
        table: pa.Table | None = getattr(state, name)
        if table is None:
            continue
        with ipc.new_file(folder / f"{name}.arrow", table.schema) as out:
            out.write_table(table)
    failed = {"filename": error.filename, "problem": error.problem} if error is not None else None
    (folder / BOOKS_FILE).write_text(json.dumps({"books": state.books, "meta": meta, "error": failed}))


def read_part(folder: Path) -> Part:
    """A part folder back, its columns memory-mapped (the folder may be removed once read: the mapping
    stays valid)."""
    doc = json.loads((folder / BOOKS_FILE).read_text())
    tables = {name: ipc.open_file(pa.memory_map(str(folder / f"{name}.arrow"))).read_all() for name in TABLES}
    tables |= {name: ipc.open_file(pa.memory_map(str(folder / f"{name}.arrow"))).read_all() for name in LINKED_TABLES
               if (folder / f"{name}.arrow").exists()}
    failed = doc["error"]
    error = BadTrace(failed["filename"], failed["problem"]) if failed is not None else None
    return Part(BuilderState(**tables, books=doc["books"]), doc["meta"], error)


def merge(builder: TraceBuilder, part: Part) -> dict[str, Any]:
    """Append a part to the run's builder; returns its parser's metadata, or raises its parser's error
    (after appending, as the parser would have left it)."""
    import_state(builder, part.state)
    if part.error is not None:
        raise part.error
    assert part.meta is not None
    return part.meta


# ---- the parse job ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartJob:
    """One Chrome/Kineto file to parse into the part folder `out`: by path (file-backed members) or its
    bytes; `instance` and `scratch` as the in-process parse would pass them. `limits` travel whole: a
    worker keeps to limits.memory_mb as the ingest's process would for the same file. `spill_min_bytes`
    is the ingest's process's chrome_fast.SPILL_MIN_BYTES (a worker imported its own copy of the module)."""

    name: str
    out: Path
    limits: IngestLimits
    instance: str = ""
    path: Path | None = None
    data: bytes | None = None
    scratch: Path | None = None
    spill_min_bytes: int | None = None


def parse_part(job: PartJob) -> Path:
    """Parse one file and write it as a part (a worker's whole job; the worker is the run's own, so the
    run's spill threshold may be set in it)."""
    if job.spill_min_bytes is not None:
        chrome_fast.SPILL_MIN_BYTES = job.spill_min_bytes
    as_ingest_process()
    builder, meta, error = _parse(job)
    write_part(builder, job.out, meta, error, link=error is None)
    return job.out


def parse_here(job: PartJob) -> Part:
    """Parse one file into a part held in memory (the ingest's own process taking a job)."""
    builder, meta, error = _parse(job)
    return Part(export_state(builder, link=error is None), meta, error)


def _parse(job: PartJob) -> tuple[TraceBuilder, dict[str, Any] | None, BadTrace | None]:
    """One file into a fresh builder. Only BadTrace is the input's fault and travels in the part; anything
    else is raised, as in the in-process parse."""
    builder = TraceBuilder(job.limits)
    try:
        if job.path is not None:
            return builder, parse_chrome_file(job.path, job.name, builder, job.instance, job.scratch), None
        return builder, parse_chrome(job.data or b"", job.name, builder, job.instance), None
    except BadTrace as exc:
        return builder, None, exc


def load_part(folder: Path) -> Part:
    """read_part, then the folder removed: a part is read once, by the merge."""
    part = read_part(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return part
