"""One memory budget for what a process keeps of its runs (the store's cached tables and the memos' derived
values), least recently used first out, in the arrays' and tables' bytes; the run being worked on is never
dropped, so a run bigger than the budget is still served, alone. Why: docs/reliability.md, "Runs kept in
memory"."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from explorer.native.heap import trim_heap


class BudgetedCache(Protocol):
    """A cache under a MemoryBudget: its bytes, its least recently used entry, and dropping one."""

    def held_bytes(self) -> int: ...

    def oldest(self, spare_run: str) -> tuple[int, object] | None:
        """(its stamp, its key) of the least recently used entry not of run `spare_run`; None without any."""

    def drop(self, key: object) -> None: ...


class MemoryBudget:
    """`limit_bytes` for the caches registered with it together; None: no limit (each cache's count only)."""

    def __init__(self, limit_bytes: int | None) -> None:
        self.limit_bytes = limit_bytes
        self._caches: list[BudgetedCache] = []
        self._clock = itertools.count()
        self._lock = threading.Lock()

    def register(self, cache: BudgetedCache) -> None:
        with self._lock:
            self._caches.append(cache)

    def stamp(self) -> int:
        """A use's place in time (entries are dropped in the order of their last use)."""
        return next(self._clock)

    def held_bytes(self) -> int:
        return sum(c.held_bytes() for c in list(self._caches))

    def settle(self, run_id: str) -> None:
        """Drop the least recently used entries, of any cache, but of run `run_id` (the one in use), until the
        caches hold no more than the limit; then give the freed memory back. Call it without holding a
        cache's own lock (it takes them)."""
        if self.limit_bytes is None:
            return
        dropped = False
        with self._lock:
            while self.held_bytes() > self.limit_bytes:
                candidates = [(found, cache) for cache in self._caches if (found := cache.oldest(run_id))]
                if not candidates:
                    break
                (_, key), cache = min(candidates, key=lambda c: c[0][0])
                cache.drop(key)
                dropped = True
        if dropped:
            trim_heap()


def nbytes_of(value: Any, _depth: int = 0) -> int:
    """The bytes of the arrays and tables in `value` (a table, an array, a dataclass, a mapping or sequence of
    them, nested); other objects count as nothing."""
    if _depth > 8:
        return 0
    if isinstance(value, (pa.Table, pa.Array, pa.ChunkedArray, pa.RecordBatch)):
        return int(value.nbytes)
    if isinstance(value, np.memmap):  # a file's pages, mapped: the page cache's to drop, not this process's
        return 0
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (str, bytes)):
        return len(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes_of(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(nbytes_of(v, _depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(nbytes_of(v, _depth + 1) for v in value)
    return 0
