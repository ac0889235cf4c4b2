"""Slice args kept out of memory for big files: written to Arrow IPC segments as read, and given back in slice
order (OrderedArgs, bounded buckets of final positions) so memory stays within the budget. When to spill is
the reader's (chrome_fast); the tables do not depend on it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from explorer.ingest.chrome.gather import take_text, take_text_array

_SCHEMA = pa.schema([("args", pa.string())])
# Pass 1 keeps a file open per bucket: past this many (a 20 GB trace's 67M slices in buckets of one row group
# would be ~1,000, the usual limit of open files) the buckets grow instead
MAX_BUCKETS = 256
_BUCKET_SCHEMA = pa.schema([("pos", pa.int64()), ("args", pa.string())])


def _temp_file(folder: Path | None, suffix: str) -> Path:
    fd, name = tempfile.mkstemp(dir=folder, suffix=suffix)
    os.close(fd)
    return Path(name)


@dataclass
class SpilledArgs:
    """One batch of a file's args on disk, in raw order (batch `index` of an Arrow IPC file)."""

    path: Path
    index: int
    rows: int
    nbytes: int

    def __len__(self) -> int:
        return self.rows

    def read(self) -> pa.Array:
        """The batch, mapped, not read: its buffers are the file's pages (no copy into fresh memory, each page
        of which would be zeroed and faulted in), and the mapping goes with the last buffer that refers to it."""
        return ipc.open_file(pa.memory_map(str(self.path))).get_batch(self.index).column(0)


class ArgsSpillWriter:
    """Writes args to a new SpilledArgs as they are read (a file of the run's scratch folder)."""

    def __init__(self, folder: Path | None) -> None:
        self.path = _temp_file(folder, ".args.arrow")
        self._sink = pa.OSFile(str(self.path), "wb")
        self._writer = ipc.new_file(self._sink, _SCHEMA)
        self._written = 0

    def write(self, args: pa.Array) -> SpilledArgs:
        """Append one batch; what the builder keeps in its place (readable once the writer is closed)."""
        args = args.cast(pa.string())
        self._writer.write_batch(pa.record_batch([args], schema=_SCHEMA))
        self._written += 1
        return SpilledArgs(self.path, self._written - 1, len(args), args.nbytes)

    def close(self) -> None:
        self._writer.close()
        self._sink.close()

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


Segment: TypeAlias = pa.Array | SpilledArgs  # raw-order args: held (row-wise slices, small files) or spilled


def segment_batches(segments: list[Segment]) -> Iterator[pa.Array]:
    for seg in segments:
        if isinstance(seg, SpilledArgs):
            yield seg.read()
        elif len(seg):
            yield seg.cast(pa.string())


def read_segments(segments: list[Segment]) -> pa.ChunkedArray:
    """Every raw arg in memory (the rare steps that need them before finish(): Neuron linking)."""
    return pa.chunked_array(list(segment_batches(segments)), pa.string())


class OrderedArgs:
    """The args column of the slices table in final order: `order[k]` is the raw index of slice k.

    Implements explorer.model.tables.OrderedText for the store's final write."""

    def __init__(self, segments: list[Segment], order: np.ndarray, scratch: Path | None, budget_bytes: int) -> None:
        self.segments = segments
        self.order = order
        self.scratch = scratch
        self.budget_bytes = max(1, budget_bytes)

    def __len__(self) -> int:
        return len(self.order)

    def batches(self, rows: int) -> Iterator[pa.Array]:
        """The args of slices [0, rows), [rows, 2 rows), ...: buckets of a multiple of `rows` slices, each
        about the budget at most, so every batch but the last has exactly `rows` rows."""
        n = len(self.order)
        nbytes = sum(s.nbytes for s in self.segments)
        per_row = max(1, nbytes // max(1, n))
        bucket = max(1, self.budget_bytes // (per_row * rows), -(-n // (rows * MAX_BUCKETS))) * rows
        if bucket >= n:
            held = take_text(read_segments(self.segments), self.order)
            for lo in range(0, n, rows):
                yield held.slice(lo, rows).combine_chunks()
            return
        yield from self._bucketed(rows, bucket)

    def _bucketed(self, rows: int, bucket: int) -> Iterator[pa.Array]:
        """Pass 1: each raw batch split by destination bucket into one file per bucket; pass 2: per bucket,
        its pieces sorted by final position."""
        dest = np.empty(len(self.order), dtype=np.int64)
        dest[self.order] = np.arange(len(self.order), dtype=np.int64)
        n_buckets = -(-len(self.order) // bucket)
        paths = [_temp_file(self.scratch, f".bucket{k}.arrow") for k in range(n_buckets)]
        sinks = [pa.OSFile(str(p), "wb") for p in paths]
        writers = [ipc.new_file(s, _BUCKET_SCHEMA) for s in sinks]
        try:
            offset = 0
            # raw batches not split yet (about a bucket's worth: four put the 1M-event peak 35 MiB higher), their
            # final positions, their bytes
            pending: list[pa.Array] = []
            positions: list[np.ndarray] = []
            nbytes = 0
            for args in segment_batches(self.segments):
                pending.append(args)
                positions.append(dest[offset:offset + len(args)])
                offset += len(args)
                nbytes += args.nbytes
                if nbytes >= self.budget_bytes:
                    _split_by_bucket(pending, positions, bucket, n_buckets, writers)
                    pending, positions, nbytes = [], [], 0
            if pending:
                _split_by_bucket(pending, positions, bucket, n_buckets, writers)
            del pending, positions
            for w, s in zip(writers, sinks, strict=True):
                w.close()
                s.close()
            for k, path in enumerate(paths):
                # mapped, not read: the bucket's pages are the file's, and each group takes its rows alone
                with pa.memory_map(str(path)) as f:
                    table = ipc.open_file(f).read_all()
                    by_pos = _inverse(table.column("pos").to_numpy(), k * bucket)
                    held = table.column("args")
                    for lo in range(0, len(by_pos), rows):
                        yield take_text_array(held, by_pos[lo:lo + rows])
                    del table, held
                path.unlink()
        finally:
            for path in paths:
                path.unlink(missing_ok=True)

    def take(self, ids: np.ndarray) -> pa.Array:
        """The args of a few slices by final id (Neuron device linking), one raw batch in memory at a time."""
        raw = self.order[ids]
        out = np.empty(len(raw), dtype=object)
        offset = 0
        for args in segment_batches(self.segments):
            here = np.flatnonzero((raw >= offset) & (raw < offset + len(args)))
            if len(here):
                out[here] = args.take(pa.array(raw[here] - offset)).to_pylist()
            offset += len(args)
        return pa.array(out.tolist(), pa.string())


def _inverse(pos: np.ndarray, base: int) -> np.ndarray:
    """The rows of a bucket in final order: its positions are each of [base, base + len(pos)) once (a bucket
    holds every slice whose final position falls in its range), so the order is the inverse permutation, made
    in one pass (an argsort of the positions took 30x longer: 0.16 s for the buckets of 2.3M slices)."""
    by_pos = np.full(len(pos), -1, dtype=np.int64)
    by_pos[pos - base] = np.arange(len(pos), dtype=np.int64)
    if len(pos) and by_pos.min() < 0:
        raise ValueError(f"slice args: a bucket from {base} is missing positions")
    return by_pos


def _split_by_bucket(pending: list[pa.Array], positions: list[np.ndarray], bucket: int, n_buckets: int,
                     writers: list[ipc.RecordBatchFileWriter]) -> None:
    """Pass 1 of OrderedArgs for some raw batches together: gathered once in bucket order, then cut, one record
    batch per bucket. Each write to a bucket file has a fixed cost: the 10M-event file's 254 raw batches split
    one at a time into 102 buckets made 26k of them and took 4.0 CPU s."""
    pos = np.concatenate(positions)
    which = (pos // bucket).astype(np.uint8 if n_buckets <= 2**8 else np.int64)  # 8 bits: a stable radix sort
    by_bucket = np.argsort(which, kind="stable")
    cuts = np.concatenate(([0], np.cumsum(np.bincount(which, minlength=n_buckets)))).tolist()
    grouped = pa.record_batch([pa.array(pos[by_bucket]), take_text_array(pa.chunked_array(pending, pa.string()),
                                                                         by_bucket)], schema=_BUCKET_SCHEMA)
    pending.clear()  # the raw batches (mapped spill pages) go before the writes: only their gathered copy is held
    del pos, by_bucket
    for k in range(n_buckets):
        if cuts[k + 1] > cuts[k]:
            writers[k].write_batch(grouped.slice(cuts[k], cuts[k + 1] - cuts[k]))
