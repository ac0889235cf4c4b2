"""RunMemo: an LRU of values derived from a run (timeline index, breakdown, kernel table, op tables
computed on load), each built once even under concurrent requests. Runs are immutable, so entries only
leave on eviction or when the run is deleted. After each build the heap's free pages go back to the system
(explorer.native.heap): a build makes and drops several times what it keeps. Under a MemoryBudget
(explorer.store.budget), entries also leave when the budget's caches together hold too much."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from explorer.native.heap import trim_heap
from explorer.store.budget import MemoryBudget, nbytes_of

T = TypeVar("T")


class RunMemo:
    """LRU of values derived from a run, each built once even under concurrent requests."""

    def __init__(self, max_entries: int = 16, budget: MemoryBudget | None = None) -> None:
        # key -> (value, its bytes, the stamp of its last use)
        self._values: OrderedDict[tuple[str, str], tuple[Any, int, int]] = OrderedDict()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._max = max_entries
        self.budget = budget or MemoryBudget(None)
        self.budget.register(self)

    def get(self, run_id: str, kind: str, build: Callable[[], T]) -> T:
        key = (run_id, kind)
        with self._lock:
            if (found := self._use(key)) is not None:
                return found[0]  # type: ignore[no-any-return]
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if (found := self._use(key)) is not None:
                    return found[0]  # type: ignore[no-any-return]
            value = build()
            size = nbytes_of(value)
            with self._lock:
                self._values[key] = (value, size, self.budget.stamp())
                self._locks.pop(key, None)
                evicted = [self._values.popitem(last=False) for _ in range(len(self._values) - self._max)]
            del evicted
            self.budget.settle(run_id)
            trim_heap()  # what the build made and dropped (several times what it keeps), and what was evicted
            return value

    def _use(self, key: tuple[str, str]) -> tuple[Any, int, int] | None:
        """The entry, now the most recently used (under self._lock)."""
        entry = self._values.get(key)
        if entry is not None:
            entry = self._values[key] = (entry[0], entry[1], self.budget.stamp())
            self._values.move_to_end(key)
        return entry

    def holds(self, run_id: str, kind: str) -> bool:
        """Whether the value is built (and kept) now, without building it."""
        with self._lock:
            return (run_id, kind) in self._values

    def forget(self, run_id: str) -> None:
        with self._lock:
            for key in [k for k in self._values if k[0] == run_id]:
                del self._values[key]

    # ---- as a cache of a MemoryBudget ----

    def held_bytes(self) -> int:
        with self._lock:
            return sum(size for _, size, _ in self._values.values())

    def oldest(self, spare_run: str) -> tuple[int, object] | None:
        with self._lock:
            return next(((stamp, key) for key, (_, _, stamp) in self._values.items() if key[0] != spare_run), None)

    def drop(self, key: object) -> None:
        with self._lock:
            self._values.pop(key, None)  # type: ignore[call-overload]
