"""The compiled events-array reader (`_kscan.c`; explorer.native.loader) as Arrow record batches with the
DuckDB path's columns, so everything after the read is shared. Strict: what it cannot read exactly as
msgspec would, it refuses (`Refused`); without the library, `available()` is False and DuckDB's reader
takes big files."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from explorer.ingest.times import US_DECIMAL
from explorer.native import loader as native

LIBRARY = native.beside(__file__, "_kscan")
# the C enums, in order
TEXT = ("ph", "name", "cat", "pid", "tid", "id", "bp", "s", "scope", "dims", "args")
F_TS, F_DUR, F_ID = 1, 2, 4
DONE, FULL, BAD = 0, 1, -1
ABI = 2  # KSCAN_ABI in the C file: bumped with any change of kscan()'s arguments or columns
BATCH_BYTES = 32 * 2**20  # most text a batch's column holds: a range longer than this is read in several batches

_ID = TEXT.index("id")


class Refused(Exception):
    """The reader does not take this input (its reason and where)."""


def _load() -> ctypes.CDLL | None:
    lib = native.load(LIBRARY, "kscan_abi", ABI)
    if lib is None:
        return None
    lib.kscan.restype = ctypes.c_int64
    lib.kscan.argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_char_p))
    return lib


_LIB = _load()


def available() -> bool:
    """Whether the compiled reader is installed (built, of this version). Settings.native_reader (through
    IngestLimits) decides whether an ingest uses it."""
    return _LIB is not None


def read(m: mmap.mmap, lo: int, hi: int, rows: int,
         read_to: Callable[[int, int], None] | None = None) -> Iterator[pa.RecordBatch]:
    """The events in the bytes [lo, hi) of the mapping (`ws event (, event)* ws`: no bracket, at least one
    event) as batches of at most `rows` rows, in file order; Refused at the first thing the reader does not take.
    `read_to(start, end)` is told each span of bytes read, once its batch is made.

    The reader holds the mapping's buffer while it reads: closing the mapping under a read is refused
    (BufferError), and a mapping its owner has dropped stays mapped until the last read of it is over."""
    assert _LIB is not None and 0 <= lo < hi <= len(m)
    held = np.frombuffer(m, dtype=np.uint8)  # an export of the mapping until the read ends, however it ends
    try:
        base = int(held.ctypes.data)
        while True:
            status, batch, nxt = _one(base, lo, hi, rows)
            if read_to is not None:
                read_to(lo, hi if status == DONE else nxt)
            yield batch
            if status == DONE:
                return
            lo = nxt
    finally:
        del held


def _one(base: int, lo: int, hi: int, rows: int) -> tuple[int, pa.RecordBatch, int]:
    assert _LIB is not None
    # text never grows when decoded, and a default ("0", "{}") is shorter than the event it fills in for
    cap = min(hi - lo + 16, BATCH_BYTES)
    rows = max(1, min(rows, hi - lo))
    num = np.empty((4, rows), np.int64)
    flags = np.empty(rows, np.uint8)
    off = np.empty((len(TEXT), rows + 1), np.int32)
    data = [np.empty(cap, np.uint8) for _ in TEXT]
    pointers = (ctypes.c_void_p * len(TEXT))(*[d.ctypes.data for d in data])
    caps = np.full(len(TEXT), cap, np.int64)
    out = np.zeros(3, np.int64)
    why = ctypes.c_char_p()
    status = _LIB.kscan(base, lo, hi, rows, num.ctypes.data, flags.ctypes.data, off.ctypes.data, pointers,
                        caps.ctypes.data, out.ctypes.data, ctypes.byref(why))
    n, nxt = int(out[0]), int(out[1])
    if status == BAD:
        raise Refused(f"{(why.value or b'unreadable').decode()} (at byte {int(out[2])})")
    columns = {name: _text(off[i, :n + 1], data[i], n, (flags[:n] & F_ID) != 0 if i == _ID else None)
               for i, name in enumerate(TEXT)}
    return int(status), pa.record_batch({
        "ph": columns["ph"], "name": columns["name"], "cat": columns["cat"],
        "ts": _us(num[0, :n], (flags[:n] & F_TS) != 0), "dur": _us(num[1, :n], (flags[:n] & F_DUR) != 0),
        "pid": columns["pid"], "tid": columns["tid"], "id": columns["id"],
        "id2": _empty_text(n),
        "bp": columns["bp"], "s": columns["s"], "scope": columns["scope"],
        "ext": pa.array(num[2, :n]), "corr": pa.array(num[3, :n]), "dims": columns["dims"], "args": columns["args"],
    }), nxt


def _validity(present: np.ndarray | None) -> pa.Buffer | None:
    if present is None or present.all():
        return None
    return pa.py_buffer(np.packbits(present, bitorder="little"))


def _text(offsets: np.ndarray, data: np.ndarray, n: int, present: np.ndarray | None) -> pa.Array:
    """A string column over the reader's buffers (no copy: the arrays keep them alive)."""
    used = int(offsets[-1])
    return pa.Array.from_buffers(pa.string(), n, [_validity(present), pa.py_buffer(offsets),
                                                  pa.py_buffer(data[:used])])


def _empty_text(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.zeros(n + 1, np.int32)), pa.py_buffer(b"")])


def _us(ns: np.ndarray, present: np.ndarray) -> pa.Array:
    """Signed ns as the DECIMAL(38,3) µs column DuckDB gives (the unscaled integer is the ns count), null where
    the event has no such field."""
    words = np.empty((len(ns), 2), np.int64)
    words[:, 0] = ns
    words[:, 1] = ns >> 63
    return pa.Array.from_buffers(US_DECIMAL, len(ns), [_validity(present), pa.py_buffer(words)])
