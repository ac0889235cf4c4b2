"""The C heap's free pages given back to the system now (glibc's malloc_trim), in any process.

For a process that keeps big arrays for a long time beside short-lived ones: a server holds each cached run's
columns and timeline index, and building them makes and drops several times as much. glibc gives back only the
top of its heap by itself, so what was freed below a block still in use stays in the RSS: measured with a
3M-event upload (bench/upload_memory.py), the server held 122 MiB more after the run's first views were built
than after a trim. Ingest processes have their own policy, made for many steps in a row
(explorer.ingest.memory). A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_lock = threading.Lock()
_trim: Callable[[int], int] | None = None
_looked = False


def _malloc_trim() -> Callable[[int], int] | None:
    global _trim, _looked
    with _lock:
        if not _looked:
            _looked = True
            try:
                trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator returns memory its own way
                log.debug("malloc_trim not available; the heap is left to the C library")
            else:
                trim.argtypes = (ctypes.c_size_t,)
                _trim = trim
    return _trim


def trim_heap() -> None:
    """Return the heap's free pages, wherever they are in it, to the system (a few ms on a heap of GBs)."""
    if (trim := _malloc_trim()) is not None:
        trim(0)
