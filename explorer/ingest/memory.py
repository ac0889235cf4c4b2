"""Freed memory goes back to the system: an ingest's peak RSS is what it holds, not what it once held.

An ingest allocates and frees hundreds of MB in big blocks (DuckDB's batches, Arrow columns, numpy sorts).
Left alone, both allocators keep that memory: Arrow's default pool (mimalloc) caches freed pages, and glibc
raises its mmap threshold after each big free (up to 32 MB), so later big arrays come from a heap that is
never trimmed. Measured on the 1M-event synthetic trace (bench/ingest_memory.py), the process held ~250 MiB
more than its live arrays (~70 MiB) when the finish began. So an ingest process uses Arrow's system pool
(malloc) and a fixed glibc mmap threshold, MMAP_THRESHOLD_BYTES: every block that size or more is its own
mapping, returned to the system when freed; smaller ones come from the heap, whose free pages go back to the
system at the end of every step of the ingest (`release`, glibc's malloc_trim: the parse, the build's steps,
the op table) as well as from its top past 128 KiB.

The threshold is 2 MiB, not glibc's starting 128 KiB: the blocks between them (a row group's column of 65,536
values, Parquet's page buffers, a reader batch's columns) are made and freed thousands of times in an ingest,
and as mappings each cost an mmap, a munmap and a page fault per 4 KiB touched (half the CPU time of the
1M-event file's ingest was the kernel's, 445k page faults; the slices' Parquet encoding alone took 0.73 s that
way and 0.48 s from the heap). From the heap, they reuse pages already there. Measured
alternating in fresh processes (bench/ingest.py's child, 8 rounds each): the 1M-event file 3.81 -> 2.79 s,
peak 274 -> 280 MiB (medians); `df_index_resolver` 0.74 -> 0.62 s, peak 198 -> 203 MiB. Without the trim at
each step's end, the 1M peak was 320 MiB: freed blocks in the middle of the heap are not returned by the
top's trim.

Nor does such a process load what it never uses and pyarrow would load anyway (`REFUSED`): pandas, which
pyarrow imports (~0.17 s, ~35 MB of RSS) the first time `pa.array` is given a Python list, only to ask whether
the list is a pandas object; and pyarrow's remote filesystems (S3 with the AWS SDK, GCS, Azure, HDFS: 8.6 MiB of
RSS), which `pyarrow.fs` loads when `pyarrow.parquet` imports it, though a write to a local path never uses them
(the store's S3 goes through fsspec's s3fs, explorer/store/storage.py). Each import is refused; pyarrow takes
that as the module being absent. A process that has already loaded one keeps it.

Arrow's own C++ code does not follow `pa.set_memory_pool`: Parquet's column writers (page buffers, dictionary
encoders, compression) allocate from the C++ default pool, mimalloc, which keeps the pages it once used (writing
the 1M-event file's slices, its arena held 27-39 MiB at the end, with at most 4.5 MiB allocated at a time). That
default is chosen once, when pyarrow loads, from the environment variable ARROW_DEFAULT_MEMORY_POOL; so the
processes that will ingest get it before (`ingest_environment`): the console script sets it for `ingest` and
`worker` before their imports (api/launch.py), and a server sets it before it starts the processes its ingests
run in, which inherit it. The 1M-event file's peak: 304-308 MiB with mimalloc there, 285-286 with the system
pool, in the same time (bench/ingest_memory.py, alternating).

This is process-wide state, set once, by the processes that exist to ingest: `trace-explorer ingest` and
`worker`, a server's ingest process (explorer.runs.apart), parse workers (explorer.ingest.parts). Not by a
process that goes on to other work: the demo profiles with torch between its ingests, and with torch's
tensors of 128 KiB and more each its own mapping (the threshold then), its later profiled steps came out slower
than its first.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from explorer.model.heap import trim_heap

log = logging.getLogger(__name__)

MMAP_THRESHOLD_BYTES = 2 * 2**20  # kept fixed (setting it stops glibc's raising it); see the module docstring
TRIM_THRESHOLD_BYTES = 128 * 1024
_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3

ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"  # read by Arrow's C++ library once, when pyarrow loads

ROOMY_MMAP_THRESHOLD_BYTES = 32 * 2**20  # within the finish's steps (roomy_heap)
ROOMY_TRIM_THRESHOLD_BYTES = 64 * 2**20

_done = False
_mallopt: Callable[[int, int], int] | None = None  # glibc's mallopt, once this process is an ingest process
_roomy_lock = threading.Lock()
_roomy_users = 0  # roomy_heap blocks open now


def ingest_environment() -> None:
    """Arrow's C++ default pool, for pyarrow loaded from now on in this process or in processes it starts: the
    system allocator (see the module's docstring), unless the variable is set already. Call it before pyarrow is
    imported, or before starting the processes that will ingest."""
    os.environ.setdefault(ARROW_POOL_VARIABLE, "system")


REFUSED = ("pandas", "pyarrow._s3fs", "pyarrow._gcsfs", "pyarrow._azurefs", "pyarrow._hdfs")


class _Refuse(importlib.abc.MetaPathFinder):
    """Refuses to import these modules and their submodules (see the module's docstring)."""

    def __init__(self, names: list[str]) -> None:
        self.names = tuple(names)
        self.prefixes = tuple(f"{n}." for n in names)

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname in self.names or fullname.startswith(self.prefixes):
            raise ModuleNotFoundError(f"{fullname} is not loaded by an ingest process (explorer.ingest.memory)",
                                      name=fullname)


def as_ingest_process() -> None:
    """Make this process give freed memory back to the system (a no-op where glibc is absent) and never load
    the REFUSED modules it has not loaded yet (idempotent). Call it before the ingest's modules are imported."""
    global _done
    if _done:
        return
    _done = True
    if refused := [name for name in REFUSED if name not in sys.modules]:
        sys.meta_path.insert(0, _Refuse(refused))
    import pyarrow as pa  # (here: importing this module must not load pyarrow, see ingest_environment)

    pa.set_memory_pool(pa.system_memory_pool())
    try:
        libc = ctypes.CDLL(None)  # the C library this interpreter runs on
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator returns memory its own way
        log.debug("mallopt not available; glibc thresholds left as they are")
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    global _mallopt
    _mallopt = mallopt


def release() -> None:
    """Give the heap's free pages back to the system, wherever they are in it (glibc's malloc_trim), in an
    ingest process (a no-op elsewhere: a process that is not one keeps glibc's own policy). Called at the end
    of each step of an ingest (explorer.model.split.TimeSplit's `after_step`): what a step freed is not part
    of the next step's RSS. The 1M-event file's nine took 23 ms together (8.5 ms the longest),
    the 10M-event file's 168 ms (67 ms)."""
    if _mallopt is not None:  # (set in an ingest process, where glibc is the allocator)
        trim_heap()


@contextmanager
def roomy_heap() -> Iterator[None]:
    """Blocks up to ROOMY_MMAP_THRESHOLD_BYTES from the heap, and its top kept, for the time of the block; then
    the usual thresholds and a `release`. For the finish's steps (columns, links, nesting, sort, tracks): on one
    thread, each makes and drops per-slice arrays of a few MB to tens of MB, which as mappings of their own are
    zeroed and faulted in page by page every time; from the heap, the next array reuses the last one's pages.
    Their peaks stay below the write's (the parse's and the write's rose by 25-40 MiB with these thresholds
    throughout, so they keep the usual ones). The thresholds are the process's: where several finishes overlap
    (a queue worker's concurrent jobs), the first raises them and the last puts them back. A no-op outside an
    ingest process."""
    global _roomy_users
    if _mallopt is None:
        yield
        return
    with _roomy_lock:
        _roomy_users += 1
        if _roomy_users == 1:
            _mallopt(_M_MMAP_THRESHOLD, ROOMY_MMAP_THRESHOLD_BYTES)
            _mallopt(_M_TRIM_THRESHOLD, ROOMY_TRIM_THRESHOLD_BYTES)
    try:
        yield
    finally:
        with _roomy_lock:
            _roomy_users -= 1
            if _roomy_users == 0:
                _mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                _mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        release()
