"""Server state held by the app: settings, the store, the ingest worker and per-run derived data.

Derived data (timeline index, breakdown, kernel table) is built once per run on first use and kept in a small
LRU; runs are immutable, so entries only leave on eviction or when the run is deleted.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from api.upload import IngestWorker
from explorer.analysis.kernels import KernelTable
from explorer.analysis.lod import TimelineIndex, build_timeline_index
from explorer.config import Settings
from explorer.kernel_page import compute_run_kernels
from explorer.report import compute_run_breakdown
from explorer.store.runs import RunStore

T = TypeVar("T")
log = logging.getLogger(__name__)


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
                while len(self._values) > self._max:
                    self._values.popitem(last=False)
            return value

    def forget(self, run_id: str) -> None:
        with self._lock:
            for key in [k for k in self._values if k[0] == run_id]:
                del self._values[key]


@dataclass
class AppState:
    settings: Settings
    store: RunStore
    worker: IngestWorker
    memo: RunMemo

    def timeline_index(self, run_id: str, origin_ns: int) -> TimelineIndex:
        def build() -> TimelineIndex:
            t = self.store.table
            return build_timeline_index(t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "counters"),
                                        t(run_id, "flows"), origin_ns, t(run_id, "instants"))

        return self.memo.get(run_id, "timeline", build)

    def breakdown(self, run_id: str) -> dict[str, Any]:
        """Lane busy/idle and device gaps of a run, computed once (API twin and overview page share it)."""
        return self.memo.get(run_id, "breakdown", lambda: compute_run_breakdown(self.store, run_id))

    def kernels(self, run_id: str) -> KernelTable:
        """The kernel table of a run, computed once (the kernels page, its API twin and the report share it)."""
        return self.memo.get(run_id, "kernels", lambda: compute_run_kernels(self.store, run_id))

    def warm_latest(self, count: int) -> None:
        try:
            records, _ = self.store.catalog.list(status="ready", limit=count)
        except Exception:  # e.g. the catalog closed under a short-lived app: nothing to warm
            log.debug("no runs to warm", exc_info=True)
            return
        for rec in records:
            self.warm(rec.id)

    def warm(self, run_id: str) -> None:
        """Build a fresh run's timeline index now (ingest worker), not on its first view."""
        try:
            rec = self.store.get(run_id)
            self.timeline_index(run_id, int(rec.summary.get("start_ns", 0)))
        except Exception:  # a cache warm-up must never turn a good ingest into an error
            log.exception("warming the timeline index of run %s failed", run_id)
