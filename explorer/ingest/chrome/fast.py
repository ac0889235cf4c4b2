"""Fast path for big Chrome/Kineto files: DuckDB's parallel JSON reader into Arrow columns, fed to the builder
column-wise, with anything DuckDB cannot read cleanly falling back to the per-event path before the builder
is touched, so both paths give the same run. Times are read as exact decimals (explorer.ingest.times)."""

from __future__ import annotations

import itertools
import json
import logging
import mmap
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.chrome import kscan
from explorer.ingest.chrome.decode import ObjectDoc, doc_meta, parse_chrome, with_format
from explorer.ingest.chrome.feed import (
    INSTANT_PHASES,
    KINETO_ARG_NAMES,
    MEMORY_NAME,
    BulkCounts,
    Event,
    Feeder,
    MemoryPoints,
    memory_points,
    shapes_column,
)
from explorer.ingest.chrome.gather import take_rows
from explorer.ingest.chrome.json_check import BETWEEN_EVENTS
from explorer.ingest.chrome.spill import ArgsSpillWriter, SpilledArgs
from explorer.ingest.columns import NONE, as_codes
from explorer.ingest.links import flow_kind_index
from explorer.ingest.times import MAX_TS_NS, decimal_column_ns, to_ns

log = logging.getLogger(__name__)

FAST_MIN_BYTES = 8 * 2**20  # below this the msgspec path is as fast and simpler
SPILL_MIN_BYTES = 32 * 2**20  # from this size on, args go to disk as they are read (explorer.ingest.chrome.spill)
DUCKDB_MEMORY_SHARE = 0.4  # of the ingest's memory budget (IngestLimits.memory_mb): DuckDB's memory_limit
DUCKDB_MIN_MB = 64  # below this its JSON reader runs out of memory on two threads (measured: 40 MB fails)
# DuckDB's largest event object: its share of DuckDB's limit / 8, within these. Its JSON reader's buffers are
# sized by it and filled (on the 1M-event trace a 64 MB ceiling cost ~90 MiB more RSS than 8 MB); an event
# object past it (none seen in real traces: the largest are a few KB) makes the file take the msgspec path.
OBJECT_BYTES = (2**20, 8 * 2**20)
BATCH_ROW_BYTES = 2048  # budget per batch row (the row, its reductions, DuckDB's copy): batch rows = budget / this
# DuckDB reads one JSON array file on one thread: the events array is carved into files cut between two events,
# which its reader parses in parallel and gives back in file order: DUCKDB_PIECES of them, none under
# PIECE_MIN_BYTES, and more where they would pass PIECE_MAX_BYTES. Measured on 2 cores, DuckDB's reader alone:
# the 1M-event trace (210 MB) 3.8 s as one file, 3.2 s as 2, 2.6 s as 4, 2.1 s as 8, 2.2 s as 16; the 10M-event
# trace (2.1 GB) 28.9 s as 8 files, 18.5 s as 64 (with big pieces, one thread waits on the other's order).
DUCKDB_PIECES = 8
PIECE_MIN_BYTES = 8 * 2**20
PIECE_MAX_BYTES = 32 * 2**20
# Kineto writes each event from a line of its own: a cut at a line break cannot be inside a string (JSON strings
# hold no raw line break), only inside args printed over several lines, which Kineto does not do with objects
_EVENT_LINE = re.compile(rb"\}\s*,\s*\n\s*\{")
_WHITESPACE = re.compile(rb"[ \t\r\n]*")
LINE_SEARCH_BYTES = 2**20  # how far to look for such a line before taking any `},{`

_COLUMNS = ("{ph: 'VARCHAR', name: 'VARCHAR', cat: 'VARCHAR', ts: 'DECIMAL(38,3)', dur: 'DECIMAL(38,3)', pid: 'JSON', "
            "tid: 'JSON', id: 'JSON', id2: 'JSON', bp: 'VARCHAR', s: 'VARCHAR', scope: 'VARCHAR', args: 'JSON'}")
_SELECT = """
SELECT coalesce(ph, '') AS ph, coalesce(name, '') AS name, coalesce(cat, '') AS cat, ts, dur,
       coalesce(json_extract_string(pid, '$'), '0') AS pid, coalesce(json_extract_string(tid, '$'), '0') AS tid,
       json_extract_string(id, '$') AS id, coalesce(id2::VARCHAR, '') AS id2, coalesce(bp, '') AS bp,
       coalesce(s, '') AS s, coalesce(scope, '') AS scope,
       coalesce({ext}, -1) AS ext, coalesce({corr}, -1) AS corr, coalesce({dims}, '') AS dims,
       coalesce(args::VARCHAR, '{{}}') AS args
FROM (SELECT *, json_extract(args, [{arg_paths}])::VARCHAR[] AS x
      FROM read_json({path}, format = 'array', columns = {columns}, maximum_object_size = {object_bytes}))
"""


def _arg_sql() -> dict[str, str]:
    """The SELECT's Kineto-arg pieces from KINETO_ARG_NAMES: one JSON path per name, and per field the
    first of its names that is present (ids as BIGINT, dims as text)."""
    paths: list[str] = []
    picks: dict[str, str] = {}
    for field, names in KINETO_ARG_NAMES.items():
        at = [f"x[{len(paths) + i + 1}]" for i in range(len(names))]
        paths += ["'$.\"" + name + "\"'" for name in names]
        picks[field] = ", ".join(at if field == "input_dims" else [f"TRY_CAST({x} AS BIGINT)" for x in at])
    return {"arg_paths": ", ".join(paths), "ext": picks["external_id"], "corr": picks["correlation"],
            "dims": picks["input_dims"]}


class _Unsupported(Exception):
    """The fast path cannot take this file; use the general one."""


def parse_chrome_file(path: Path, name: str, builder: TraceBuilder, instance: str = "",
                      scratch: Path | None = None) -> dict[str, Any]:
    """Parse a Chrome/Kineto file from disk: a big one by the compiled reader, else by DuckDB's."""
    size = path.stat().st_size
    if size < FAST_MIN_BYTES:
        return parse_chrome(path.read_bytes(), name, builder, instance)
    memory_mb = builder.limits.memory_mb
    spill_to = scratch if scratch is not None and size >= SPILL_MIN_BYTES else None
    threads = builder.limits.parse_threads or max(1, os.cpu_count() or 1)
    if builder.limits.native_reader and kscan.available():
        try:
            with builder.split.step("parse"):
                batches, meta, spill = _read_native(path, memory_mb, threads, spill_to)
        except _Unsupported as exc:  # the check below and DuckDB's reader decide
            log.info("compiled reader not used for %s: %s", name, exc)
        else:
            return _fed(batches, meta, spill, name, builder, instance)
    return _parse_with_duckdb(path, name, builder, instance, scratch, spill_to, threads)


def _parse_with_duckdb(path: Path, name: str, builder: TraceBuilder, instance: str, scratch: Path | None,
                       spill_to: Path | None, threads: int) -> dict[str, Any]:
    """DuckDB's reader, checked by msgspec in a child (_Check); the msgspec path where either refuses. DuckDB
    is imported here: the compiled reader's ingest does without it (~25 MB of RSS)."""
    import duckdb

    memory_mb = builder.limits.memory_mb
    check = _Check(path)
    pieces = DUCKDB_PIECES if threads > 1 else 1
    try:
        with builder.split.step("parse"), check:
            try:
                batches, meta, spill = _read_events(path, scratch, memory_mb, threads, pieces, spill_to)
            except (duckdb.Error, OSError) as exc:  # DuckDB's errors reach the reader's caller as OSError
                if pieces == 1:
                    raise
                # a cut inside an event (a string or an array of objects holding "},{") failed its piece
                log.info("%s read again as one piece: %s", name, exc)
                batches, meta, spill = _read_events(path, scratch, memory_mb, threads, 1, spill_to)
    except (_Unsupported, duckdb.Error, OSError) as exc:
        log.info("fast path not used for %s: %s", name, exc)
        return parse_chrome(path.read_bytes(), name, builder, instance)
    return _fed(batches, meta, spill, name, builder, instance)


def _fed(batches: list[_Batch], meta: dict[str, Any], spill: ArgsSpillWriter | None, name: str,
         builder: TraceBuilder, instance: str) -> dict[str, Any]:
    if spill is not None:
        spill.close()
    with builder.split.step("feed"):
        return _feed(batches, meta, name, builder, instance)


def _read_native(path: Path, memory_mb: int, threads: int,
                 spill_to: Path | None) -> tuple[list[_Batch], dict[str, Any], ArgsSpillWriter | None]:
    """The file read by the compiled reader (explorer.ingest.chrome.kscan): the events array cut into pieces between
    events, read on `threads` threads, reduced as the DuckDB path's batches are. _Unsupported when the reader
    refuses the file (nothing of it kept). A cut inside an event (an object list printed over several lines)
    fails its piece: the array is then read again as one piece."""
    rows = _batch_rows(memory_mb)
    spill = ArgsSpillWriter(spill_to) if spill_to is not None else None
    try:
        with _mapped(path) as m:
            open_at, close_at, meta = _events_span(m)
            base_ns = int(meta.get("base_ns", 0))
            lo, hi = _WHITESPACE.match(m, open_at + 1, close_at).end(), close_at  # type: ignore[union-attr]
            if lo == hi:
                return [], meta, spill
            ranges = _event_ranges(m, lo, hi, NATIVE_PIECE_BYTES if threads > 1 else hi - lo)
            try:
                reduced = _native_pieces(m, ranges, rows, base_ns, threads, spill)
            except kscan.Refused as exc:
                if len(ranges) == 1:
                    raise _Unsupported(str(exc)) from None
                log.info("%s read again as one piece: %s", path.name, exc)
                try:
                    reduced = _native_pieces(m, [(lo, hi)], rows, base_ns, 1, spill)
                except kscan.Refused as again:
                    raise _Unsupported(str(again)) from None
            return reduced, meta, spill
    except BaseException:
        if spill is not None:
            spill.discard()
        raise


@contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap]:
    """The file mapped read-only, unmapped at a normal exit. An exception leaves the mapping to its references:
    an interrupt that lands while the pool starts a thread leaves a reader the pool does not wait for, and
    each read holds the mapping (kscan.read), so it is unmapped after the last read of it, never under one."""
    with path.open("rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    yield m
    m.close()


NATIVE_PIECE_BYTES = 8 * 2**20  # a thread's unit of work: pieces are read in parallel and fed in file order


def _native_pieces(m: mmap.mmap, ranges: list[tuple[int, int]], rows: int, base_ns: int, threads: int,
                   spill: ArgsSpillWriter | None) -> list[_Batch]:
    """Each range read and reduced on a thread of its own, at most `threads` + 1 ahead of the one fed; the
    args spilled in file order; the file's pages dropped as they are read."""

    def drop(lo: int, hi: int) -> None:  # the pages read: a mapped file's pages count in the RSS
        start = lo // mmap.PAGESIZE * mmap.PAGESIZE
        if (length := (hi - start) // mmap.PAGESIZE * mmap.PAGESIZE) > 0:
            m.madvise(mmap.MADV_DONTNEED, start, length)

    def piece(lo: int, hi: int) -> list[_Batch]:
        return [_Batch.of(batch, base_ns) for batch in kscan.read(m, lo, hi, rows, drop)]

    out: list[_Batch] = []
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kscan") as pool:
        pending: deque[Future[list[_Batch]]] = deque()
        todo = iter(ranges)
        try:
            for lo, hi in itertools.islice(todo, threads + 1):
                pending.append(pool.submit(piece, lo, hi))
            while pending:
                for reduced in pending.popleft().result():
                    _spill(reduced, spill)
                    out.append(reduced)
                for lo, hi in itertools.islice(todo, 1):
                    pending.append(pool.submit(piece, lo, hi))
        finally:
            for future in pending:
                future.cancel()
    return out


def _spill(reduced: _Batch, spill: ArgsSpillWriter | None) -> None:
    if spill is not None:
        reduced.args = spill.write(reduced.x.column("args"))
        reduced.x = reduced.x.drop_columns(["args"])


def _event_ranges(m: mmap.mmap, lo: int, hi: int, piece_bytes: int) -> list[tuple[int, int]]:
    """m[lo:hi] (events and the commas between them) as ranges of about piece_bytes, each cut after an event's
    `}` and before the next one's `{` (the comma between them in neither)."""
    ranges = []
    while hi - lo > piece_bytes + piece_bytes // 2:
        at = lo + piece_bytes
        found = _EVENT_LINE.search(m, at, min(hi, at + LINE_SEARCH_BYTES)) or BETWEEN_EVENTS.search(m, at, hi)
        if found is None:
            break
        ranges.append((lo, found.start() + 1))
        lo = found.end() - 1
    ranges.append((lo, hi))
    return ranges


def _read_events(path: Path, scratch: Path | None, memory_mb: int, threads: int, pieces: int,
                 spill_to: Path | None) -> tuple[list[_Batch], dict[str, Any], ArgsSpillWriter | None]:
    """Every batch of the file reduced, its document metadata, and (with `spill_to`) the writer the complete
    events' args went to; a read that fails leaves no spill file behind."""
    spill = ArgsSpillWriter(spill_to) if spill_to is not None else None
    try:
        with _open_events(path, scratch, memory_mb, threads, pieces) as (reader, meta):
            return list(_read_all(reader, int(meta.get("base_ns", 0)), spill)), meta, spill
    except BaseException:
        if spill is not None:
            spill.discard()
        raise


def _read_all(reader: pa.RecordBatchReader, base_ns: int, spill: ArgsSpillWriter | None) -> Iterator[_Batch]:
    """Reduce each DuckDB batch at once to what the builder keeps, so the full table never exists; with a
    spill, the complete events' args go to disk here and the batch keeps only where they are."""
    for batch in reader:
        reduced = _Batch.of(batch, base_ns)
        _spill(reduced, spill)
        yield reduced


# the check's process: explorer imported from where this one imports it (a checkout or an install), then
# json_check's main, which imports msgspec and nothing of the explorer's
_CHECK_MAIN = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r}); "
               "from explorer.ingest.chrome.json_check import main; sys.exit(main(sys.argv[1:]))")


class _Check:
    """explorer.ingest.chrome.json_check, in a process of its own started on entry, while DuckDB reads; waited for
    on exit, before the builder is touched: a file it refuses (or could not check) takes the general path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.refused: str | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Check:
        self.process = subprocess.Popen([sys.executable, "-c", _CHECK_MAIN, str(self.path)], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        if exc[0] is not None:  # the read failed: the check's answer is not needed
            self.process.kill()
            self.process.communicate()
            return
        out, err = self.process.communicate()
        try:
            answer = json.loads(out.decode().strip().splitlines()[-1])
            self.refused = answer["refused"]
        except (ValueError, IndexError, KeyError, TypeError):
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {self.process.returncode}"]
            self.refused = f"not checked ({tail[0]})"
        if self.refused:
            raise _Unsupported(self.refused)


@contextmanager
def _open_events(path: Path, scratch: Path | None, memory_mb: int, threads: int = 0,
                 pieces: int = 1) -> Iterator[tuple[pa.RecordBatchReader, dict[str, Any]]]:
    """DuckDB's reader over the file's events (in `pieces` files cut between events when the array is big
    enough), and the document's metadata."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        open_at, close_at, meta = _events_span(m)
        ranges = _piece_ranges(m, open_at, close_at, pieces)
        if len(ranges) == 1 and not m[:open_at].strip():  # a bare array: read in place
            with _query([path], scratch, memory_mb, threads) as reader:
                yield reader, meta
            return
        with _carved(f.fileno(), ranges, scratch) as files, _query(files, scratch, memory_mb, threads) as reader:
            yield reader, meta


def _events_span(m: mmap.mmap) -> tuple[int, int, dict[str, Any]]:
    """Where the events array opens (`[`) and closes (`]`), and the document's metadata."""
    start = 0
    while start < len(m) and m[start:start + 1] in b" \t\r\n":
        start += 1
    first = m[start:start + 1]
    if first == b"[":
        if m[max(0, len(m) - 4096):].rstrip()[-1:] != b"]":
            raise _Unsupported("array without its closing bracket")
        return start, m.rfind(b"]"), {"base_ns": 0}
    if first != b"{":
        raise _Unsupported("not a JSON object or array")
    key = m.find(b'"traceEvents"')
    open_at = m.find(b"[", key) if key >= 0 else -1
    if key < 0 or open_at < 0 or m[key + 13:open_at].strip() != b":":
        raise _Unsupported("no traceEvents array")
    close_at, doc = _array_end(m, key, open_at)
    try:
        meta = doc_meta(to_ns(doc.baseTimeNanoseconds), doc.deviceProperties, doc.distributedInfo,
                        doc.displayTimeUnit, doc.host_name)
    except (msgspec.DecodeError, RecursionError) as exc:  # the general path words the error
        raise _Unsupported(f"document metadata unreadable ({exc})") from None
    return open_at, close_at, meta


def _piece_ranges(m: mmap.mmap, open_at: int, close_at: int, pieces: int) -> list[tuple[int, int]]:
    """The array from its `[` at open_at to its `]` at close_at as byte ranges of about equal size: `pieces`
    of them (1: the whole array), or more where they would pass PIECE_MAX_BYTES, fewer where they would be
    under PIECE_MIN_BYTES; each cut after an event's `}` and before the next one's `{`: the first range
    starts at the `[`, the last ends after the `]`. A cut that lands inside an event (`},{` in a string)
    makes its piece invalid JSON, so DuckDB fails on it and the caller reads the file whole."""
    size = close_at - open_at
    n = 1 if pieces <= 1 else max(1, min(max(pieces, -(-size // PIECE_MAX_BYTES)), size // PIECE_MIN_BYTES))
    ranges, lo = [], open_at
    for k in range(1, n):
        at = max(lo + 1, open_at + size * k // n)
        found = _EVENT_LINE.search(m, at, min(close_at, at + LINE_SEARCH_BYTES)) or BETWEEN_EVENTS.search(m, at, close_at)
        if found is None:
            break
        ranges.append((lo, found.start() + 1))
        lo = found.end() - 1
    ranges.append((lo, close_at + 1))
    return ranges


@contextmanager
def _carved(src_fd: int, ranges: list[tuple[int, int]], scratch: Path | None) -> Iterator[list[Path]]:
    """Each range as a file of its own, bracketed into a JSON array (the first has the `[`, the last the `]`
    of the original); removed on exit."""
    files: list[Path] = []
    try:
        for i, (lo, hi) in enumerate(ranges):
            fd, name = tempfile.mkstemp(suffix=".json", dir=scratch)
            files.append(Path(name))
            with os.fdopen(fd, "wb") as out:
                if i > 0:
                    out.write(b"[")
                    out.flush()
                _copy_range(src_fd, out.fileno(), lo, hi - lo)
                if i < len(ranges) - 1:
                    out.write(b"]")
        yield files
    finally:
        for file in files:
            file.unlink(missing_ok=True)


def _array_end(m: mmap.mmap, key: int, open_at: int) -> tuple[int, ObjectDoc]:
    """Where the events array closes: the last `]` after an event object such that what follows is
    the rest of a valid document (keys after the array, e.g. Kineto's "logs", may hold arrays too)."""
    head = bytes(m[:key])
    pos = len(m)
    for _ in range(64):
        pos = m.rfind(b"]", open_at, pos)
        if pos < 0:
            break
        before = m[max(open_at, pos - 64):pos].rstrip()
        if before.endswith((b"}", b"[")):
            try:
                doc = msgspec.json.decode(head + b'"traceEvents": []' + bytes(m[pos + 1:]), type=ObjectDoc,
                                          strict=False)
            except (msgspec.MsgspecError, RecursionError):
                continue
            return pos, doc
    raise _Unsupported("could not find where the traceEvents array ends")


def _copy_range(src_fd: int, dst_fd: int, offset: int, length: int) -> None:
    done = 0
    while done < length:
        n = os.copy_file_range(src_fd, dst_fd, min(length - done, 1 << 30), offset + done)
        if n <= 0:
            raise _Unsupported("could not copy the events array")
        done += n


@contextmanager
def _query(paths: list[Path], scratch: Path | None, memory_mb: int,
           threads: int = 0) -> Iterator[pa.RecordBatchReader]:
    """The events as Arrow batches; DuckDB kept to its share of the ingest's memory budget (spilling to
    the scratch folder past it) and batches sized so that one batch's work fits the budget too."""
    duck_mb = max(DUCKDB_MIN_MB, int(memory_mb * DUCKDB_MEMORY_SHARE))
    config = {"threads": threads or max(1, os.cpu_count() or 1), "autoinstall_known_extensions": False,
              "autoload_known_extensions": False, "preserve_insertion_order": True, "memory_limit": f"{duck_mb}MB"}
    # its JSON reader holds buffers of twice the largest object per thread: they must fit the limit
    object_bytes = min(OBJECT_BYTES[1], max(OBJECT_BYTES[0], duck_mb * 2**20 // 8))
    import duckdb  # only on this path (see _parse_with_duckdb)

    con = duckdb.connect(config=config)  # type: ignore[arg-type]
    try:
        con.execute("SET enable_progress_bar = false")
        if scratch is not None:
            con.execute("SET temp_directory = ?", [str(scratch)])
        literal = "[" + ", ".join("'" + str(path).replace("'", "''") + "'" for path in paths) + "]"
        yield con.sql(_SELECT.format(path=literal, columns=_COLUMNS, object_bytes=object_bytes, **_arg_sql())).to_arrow_reader(_batch_rows(memory_mb))
    finally:
        con.close()


BATCH_ROWS = 65_536  # as many as the memory budget allows, up to this (more made the reader's peak higher, not faster)


def _batch_rows(memory_mb: int) -> int:
    return max(1, min(BATCH_ROWS, memory_mb * 2**20 // BATCH_ROW_BYTES))



@dataclass
class _Batch:
    """One DuckDB batch reduced to: complete events (columns), flow steps (columns), other events.
    `ts` is absolute ns (the file's base added), checked as the per-event path checks it."""

    n: int
    thread_key: pa.DictionaryArray  # pid NUL tid, encoded: the batch's own columns are not kept (see of())
    ts: np.ndarray
    dur: np.ndarray
    x: pa.RecordBatch  # the complete events with usable times
    x_mask: np.ndarray
    flows: pa.RecordBatch  # the flow steps with an id and a usable time
    flow_mask: np.ndarray
    rest: list[Event]  # every other event but the [memory] instants, for the per-event Feeder
    memory: MemoryPoints | None  # the [memory] instants with a usable time, taken apart (_memory_of)
    bad_x: int
    bad_flows: dict[str, int]  # phase -> flow steps without id or time
    args: SpilledArgs | None = None  # where the complete events' args went (then not in `x`)

    @classmethod
    def of(cls, batch: pa.RecordBatch, base_ns: int) -> _Batch:
        ph = batch.column("ph")
        ts_ns, ts_ok = decimal_column_ns(batch.column("ts"), base_ns)
        dur = batch.column("dur")
        dur_ns, dur_ok = decimal_column_ns(dur)
        if dur.null_count:  # a missing dur is 0 (its ns already), as on the per-event path
            dur_ok |= ~dur.is_valid().to_numpy(zero_copy_only=False)
        is_x = pc.equal(ph, "X").to_numpy(zero_copy_only=False)
        good_x = is_x & ts_ok & dur_ok & (ts_ns + dur_ns < MAX_TS_NS)
        is_flow = pc.is_in(ph, pa.array(FLOW_PHASES, pa.string())).to_numpy(zero_copy_only=False)
        flow = is_flow & pc.is_valid(batch.column("id")).to_numpy(zero_copy_only=False) & ts_ok
        memory, other = _memory_of(batch, np.nonzero(~is_x & ~is_flow)[0], ts_ns, ts_ok)
        rest = _last_of_each_metadata(batch, other)
        return cls(
            # nothing of `batch` itself may be kept: one column held keeps all of DuckDB's batch alive
            n=batch.num_rows, ts=ts_ns, dur=dur_ns,
            thread_key=pc.dictionary_encode(pc.binary_join_element_wise(batch.column("pid"), batch.column("tid"),
                                                                        "\x00")),
            x=_coded(_with_shapes(take_rows(batch, ["cat", "name", "args", "dims", "corr", "ext"],
                                            np.flatnonzero(good_x)))),
            x_mask=good_x,
            flows=take_rows(batch, ["ph", "cat", "id", "bp"], np.flatnonzero(flow)), flow_mask=flow,
            rest=_events(batch, rest), memory=memory,
            bad_x=int((is_x & ~good_x).sum()), bad_flows=_count_by_phase(ph, is_flow & ~flow),
        )


def _memory_of(batch: pa.RecordBatch, rows: np.ndarray, ts_ns: np.ndarray,
               ts_ok: np.ndarray) -> tuple[MemoryPoints | None, np.ndarray]:
    """The [memory] instants among `rows` that have a usable time, taken apart column-wise (memory_points), and
    the rows left for the per-event Feeder. Kineto writes one per allocation and free (`df_index_resolver`:
    28k of its 216k events); as Events through the Feeder they took a third of that trace's parse."""
    if not len(rows):
        return None, rows
    at = pa.array(rows)
    named = pc.and_(pc.equal(batch.column("name").take(at), MEMORY_NAME),
                    pc.is_in(batch.column("ph").take(at), pa.array(INSTANT_PHASES, pa.string())))
    mask = named.to_numpy(zero_copy_only=False) & ts_ok[rows]
    if not mask.any():
        return None, rows
    picked = rows[mask]
    taken = take_rows(batch, ["pid", "tid", "cat", "args"], picked)
    points, left = memory_points(taken.column("pid").to_pylist(), ts_ns[picked].tolist(),
                                 taken.column("args").to_pylist(), taken.column("tid").to_pylist(),
                                 taken.column("cat").to_pylist())
    mask[np.flatnonzero(mask)[left]] = False  # args this decoding does not take: the per-event path's
    return points, rows[~mask]


def _coded(x: pa.RecordBatch) -> pa.RecordBatch:
    """The complete events' category, name and shapes as codes (columns.as_codes), encoded here, in the reader's
    thread, rather than by the builder on the main thread."""
    for field in ("cat", "name", "dims"):
        x = x.set_column(x.schema.get_field_index(field), field, as_codes(x.column(field)))
    return x


def _with_shapes(x: pa.RecordBatch) -> pa.RecordBatch:
    """The complete events with their "Input Dims" written as on every path (chrome_feed.shapes_text)."""
    return x.set_column(x.schema.get_field_index("dims"), "dims", shapes_column(x.column("dims")))


FLOW_PHASES = ["s", "t", "f"]  # (made an Arrow array where used: at import, pyarrow would import pandas)
METADATA_KEY = ("name", "pid", "tid", "args")  # all that Feeder._metadata reads of an M event


def _last_of_each_metadata(batch: pa.RecordBatch, rest: np.ndarray) -> np.ndarray:
    """The rows `rest` less every metadata (M) event that a later one in the batch repeats (the same name, pid,
    tid and args). Feeder._metadata reads nothing else and the last value set wins, so dropping them changes
    nothing but the per-event work: some traces repeat their names per event (`mtia_rank_0`: 310k M events
    on 10 threads, two thirds of its events)."""
    if len(rest) < 2:
        return rest
    at = pa.array(rest)
    is_m = pc.equal(batch.column("ph").take(at), "M").to_numpy(zero_copy_only=False)
    if int(is_m.sum()) < 2:
        return rest
    m = rest[is_m]
    taken = pa.array(m)
    # a hash grouping of the four columns' codes (np.unique over rows sorted them: 0.65 s on mtia_rank_0)
    codes = pa.table({c: pc.dictionary_encode(batch.column(c).take(taken)).indices for c in METADATA_KEY} |
                     {"at": np.arange(len(m))})
    last = codes.group_by(list(METADATA_KEY), use_threads=False).aggregate([("at", "max")]).column("at_max")
    kept: np.ndarray = np.sort(np.concatenate([rest[~is_m], m[last.to_numpy()]]))
    return kept


def _count_by_phase(ph: pa.Array, mask: np.ndarray) -> dict[str, int]:
    if not mask.any():
        return {}
    counts = pc.value_counts(ph.filter(pa.array(mask)))
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))


def _feed(batches: list[_Batch], meta: dict[str, Any], name: str, builder: TraceBuilder,
          instance: str) -> dict[str, Any]:
    src = builder.add_source(name, instance)
    if not any(b.n for b in batches):
        raise BadTrace(name, "the trace holds no events")
    stored = bad_x = 0
    bad_flows: Counter[str] = Counter()
    rest: list[Event] = []
    kineto = False
    flow_parts: list[tuple[pa.RecordBatch, np.ndarray, np.ndarray]] = []
    feeder = Feeder(builder, src, name, int(meta.get("base_ns", 0)))
    batches.reverse()
    while batches:  # each batch dropped once fed: its raw and its fed form are never all held at once
        b = batches.pop()
        threads = _thread_index(b.thread_key, builder, src)
        x = b.x
        ext, corr = x.column("ext").to_numpy(), x.column("corr").to_numpy()
        kineto = kineto or bool((ext >= 0).any())
        builder.add_slice_columns(threads[b.x_mask], x.column("cat"), x.column("name"), b.ts[b.x_mask],
                                  b.dur[b.x_mask], b.args if b.args is not None else x.column("args"),
                                  np.where(corr >= 0, corr, NONE), np.where(ext >= 0, ext, NONE), x.column("dims"))
        stored += x.num_rows
        if b.flows.num_rows:
            flow_parts.append((b.flows, threads[b.flow_mask], b.ts[b.flow_mask]))
        rest.extend(b.rest)
        if b.memory is not None:
            feeder.add_memory(b.memory)
        bad_x += b.bad_x
        bad_flows.update(b.bad_flows)
        del b, x, threads
    if flow_parts:
        _feed_flows(flow_parts, builder)
    bulk = BulkCounts(stored=stored, bad_time=bad_x, kineto=kineto, bad_flows=bad_flows)
    fed = feeder.feed(rest, bulk)
    return with_format(meta, fed, builder, name)


def _thread_index(encoded: pa.DictionaryArray, builder: TraceBuilder, src: int) -> np.ndarray:
    mapping = np.asarray([builder.thread(src, *k.split("\x00", 1)) for k in encoded.dictionary.to_pylist()]
                         or [0], dtype=np.int64)
    index: np.ndarray = mapping[encoded.indices.to_numpy(zero_copy_only=False)]
    return index


def _feed_flows(parts: list[tuple[pa.RecordBatch, np.ndarray, np.ndarray]], builder: TraceBuilder) -> None:
    """The file's flow steps as columns, all batches at once. A flow is (category, id) within this file: one
    dictionary encoding of the file's keys numbers its flows in order of first appearance, as one per batch
    with the codes carried over did (and a per-batch lookup against every flow seen so far made the feed
    quadratic: 47 s of a 10M-event ingest)."""
    flows = pa.Table.from_batches([p[0] for p in parts]).combine_chunks()  # one chunk: one dictionary below
    cat = flows.column("cat").chunk(0)
    encoded = pc.dictionary_encode(pc.binary_join_element_wise(cat, flows.column("id").chunk(0), "\x00"))
    codes = builder.reserve_flow_codes(len(encoded.dictionary)) + encoded.indices.to_numpy(zero_copy_only=False)
    cats = pc.dictionary_encode(cat)
    kinds = np.asarray([flow_kind_index(c) for c in cats.dictionary.to_pylist()] or [0], dtype=np.int8)
    enclosing = pc.or_(pc.equal(flows.column("bp"), "e"), pc.not_equal(flows.column("ph"), "f"))
    builder.add_flow_points_columns(codes.astype(np.int64), kinds[cats.indices.to_numpy(zero_copy_only=False)],
                                    np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]),
                                    enclosing.to_numpy())


_EVENT_COLUMNS = ("ph", "name", "cat", "ts", "dur", "pid", "tid", "id", "id2", "bp", "s", "scope", "args")


def _events(batch: pa.RecordBatch, rows: np.ndarray) -> list[Event]:
    """The batch's `rows` as the per-event Feeder's events, converted column by column (a record batch's
    to_pylist made a dict per row: 94 ms against 21 for 20k instants of df_index_resolver)."""
    if not len(rows):
        return []
    taken = take_rows(batch, list(_EVENT_COLUMNS), rows)
    columns = [_micros(taken.column(c)) if c in ("ts", "dur") else taken.column(c).to_pylist() for c in _EVENT_COLUMNS]
    return [Event(ph=ph, name=name, cat=cat, ts=ts, dur=dur, pid=pid, tid=tid, id=id_, id2=msgspec.Raw(id2.encode()),
                  bp=bp, s=s, scope=scope, args=msgspec.Raw(args.encode()))
            for ph, name, cat, ts, dur, pid, tid, id_, id2, bp, s, scope, args in zip(*columns, strict=True)]


def _micros(column: pa.Array) -> list[Any]:
    """A DECIMAL µs time column as the Feeder reads times: an int where the value is a whole number of µs (its
    fast path, and the same ns), else the Decimal; None where missing."""
    ns, ok = decimal_column_ns(column)
    whole = ok & (ns % 1000 == 0)
    micros: list[Any] = (ns // 1000).tolist()
    if whole.all():
        return micros
    values: list[Any] = column.to_pylist()
    for i in np.flatnonzero(whole).tolist():
        values[i] = micros[i]
    return values
