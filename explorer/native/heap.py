"""The C heap's free pages given back to the system now (glibc's malloc_trim), in any process that keeps big
arrays beside short-lived ones (a server's cached runs): glibc gives back only its heap's top by itself.
Ingest processes have their own policy (explorer.native.memory). A no-op where the C library is not glibc."""

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
