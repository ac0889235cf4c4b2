"""Freed memory goes back to the system: an ingest's peak RSS is what it holds, not what it once held (Arrow's
system pool, a fixed glibc mmap threshold, a heap trim after each step, pyarrow's unused imports refused).
Process-wide, so only for processes that exist to ingest. Why: docs/architecture.md, "native/memory.py"."""

from __future__ import annotations

import ctypes
import importlib.abc
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from explorer.native.heap import trim_heap

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
            raise ModuleNotFoundError(f"{fullname} is not loaded by an ingest process (explorer.native.memory)",
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
