"""The store's in-memory tables of its most recently used runs: at most a count of runs, and within a
MemoryBudget (explorer.store.budget) shared with the memos of values derived from them. Not the reading of
tables (explorer.store.runs): only keeping them."""

from __future__ import annotations

import threading
from collections import OrderedDict

import pyarrow as pa

from explorer.native.heap import trim_heap
from explorer.store.budget import MemoryBudget


class TableCache:
    """Run id -> its tables by name; a run's tables come and go together."""

    def __init__(self, max_runs: int, budget: MemoryBudget | None = None) -> None:
        # run -> (tables by name, their bytes, the stamp of the run's last use)
        self._runs: OrderedDict[str, tuple[dict[str, pa.Table], int, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_runs = max_runs
        self.budget = budget or MemoryBudget(None)
        self.budget.register(self)

    def get(self, run_id: str, name: str) -> pa.Table | None:
        """The table if kept (the run now the most recently used), else None."""
        with self._lock:
            entry = self._runs.get(run_id)
            if entry is None or name not in entry[0]:
                return None
            self._runs[run_id] = (entry[0], entry[1], self.budget.stamp())
            self._runs.move_to_end(run_id)
            return entry[0][name]

    def put(self, run_id: str, name: str, table: pa.Table) -> None:
        """Keep `table`, the run now the most recent; past `max_runs` runs or the budget, the least recently used
        go (never this run), and the heap's free pages go back to the system (explorer.native.heap)."""
        with self._lock:
            tables, size, _ = self._runs.get(run_id, ({}, 0, 0))
            old = tables.get(name)
            tables[name] = table
            self._runs[run_id] = (tables, size + table.nbytes - (old.nbytes if old is not None else 0),
                                  self.budget.stamp())
            self._runs.move_to_end(run_id)
            evicted = [self._runs.popitem(last=False) for _ in range(len(self._runs) - self.max_runs)]
        if evicted:
            del evicted  # (its tables are freed here unless a request still reads them)
            trim_heap()
        self.budget.settle(run_id)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    # ---- as a cache of a MemoryBudget ----

    def held_bytes(self) -> int:
        with self._lock:
            return sum(size for _, size, _ in self._runs.values())

    def oldest(self, spare_run: str) -> tuple[int, object] | None:
        with self._lock:
            return next(((stamp, run) for run, (_, _, stamp) in self._runs.items() if run != spare_run), None)

    def drop(self, key: object) -> None:
        with self._lock:
            self._runs.pop(str(key), None)
