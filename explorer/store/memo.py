"""RunMemo: an LRU of values derived from a run (timeline index, breakdown, kernel table, op tables
computed on load), each built once even under concurrent requests. Runs are immutable, so entries only
leave on eviction or when the run is deleted. After each build the heap's free pages go back to the system
(explorer.model.heap): a build makes and drops several times what it keeps."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from explorer.model.heap import trim_heap

T = TypeVar("T")


class RunMemo:
    """LRU of values derived from a run, each built once even under concurrent requests."""

    def __init__(self, max_entries: int = 16) -> None:
        self._values: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._max = max_entries

    def get(self, run_id: str, kind: str, build: Callable[[], T]) -> T:
        key = (run_id, kind)
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]  # type: ignore[no-any-return]
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:
                    return self._values[key]  # type: ignore[no-any-return]
            value = build()
            with self._lock:
                self._values[key] = value
                self._locks.pop(key, None)
                evicted = [self._values.popitem(last=False) for _ in range(len(self._values) - self._max)]
            del evicted
            trim_heap()  # what the build made and dropped (several times what it keeps), and what was evicted
            return value

    def holds(self, run_id: str, kind: str) -> bool:
        """Whether the value is built (and kept) now, without building it."""
        with self._lock:
            return (run_id, kind) in self._values

    def forget(self, run_id: str) -> None:
        with self._lock:
            for key in [k for k in self._values if k[0] == run_id]:
                del self._values[key]
