"""Server state held by the app: settings, the store, the ingest worker and per-run derived data.

Derived data (timeline index, breakdown, kernel table) is built once per run on first use and kept in a
RunMemo (explorer.store.memo) whose size is a setting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from explorer.analysis.collectives import has_executions
from explorer.analysis.device.tracks import DeviceTimeline, build_device_index
from explorer.analysis.kernels import KernelTable
from explorer.analysis.rank_slices import rank_key
from explorer.analysis.timeline.index import TimelineIndex
from explorer.config import Settings
from explorer.model.advice_shapes import AdviceResult
from explorer.model.device_shapes import DeviceProfileJson, DeviceView
from explorer.model.ranks import run_ranks
from explorer.model.shapes import Breakdown, RanksResult
from explorer.report.perfetto import load_device_timeline
from explorer.runs.ingesters import Ingester
from explorer.store.catalog.catalog import RunRecord
from explorer.store.memo import RunMemo
from explorer.store.runs import RunStore
from explorer.views.advice import compute_run_advice
from explorer.views.device import compute_device_view
from explorer.views.pages import (
    RunCollectives,
    compute_run_breakdown,
    compute_run_collectives,
    compute_run_kernels,
    timeline_index,
)
from explorer.views.ranks import compute_run_ranks

__all__ = ["AppState", "RunMemo"]

log = logging.getLogger(__name__)


@dataclass
class AppState:
    settings: Settings
    store: RunStore
    ingester: Ingester  # inline (this server's processes) or queued (ingest_queue=postgres)
    memo: RunMemo
    device_memo: RunMemo = field(default_factory=RunMemo)  # sized by Settings.device_cache_entries

    def timeline_index(self, run_id: str, origin_ns: int) -> TimelineIndex:
        return self.memo.get(run_id, "timeline", lambda: timeline_index(self.store, run_id, origin_ns))

    def breakdown(self, run_id: str, ranks: tuple[int, ...] | None = None) -> Breakdown:
        """Lane busy/idle and device gaps of a run (or of some of its ranks), computed once (API twin and
        overview page share it)."""
        return self.memo.get(run_id, "breakdown" + rank_key(ranks),
                             lambda: compute_run_breakdown(self.store, run_id, ranks))

    def kernels(self, run_id: str, ranks: tuple[int, ...] | None = None) -> KernelTable:
        """The kernel table of a run (or of some of its ranks), computed once (the kernels page, its API twin
        and the report share it)."""
        return self.memo.get(run_id, "kernels" + rank_key(ranks), lambda: compute_run_kernels(self.store, run_id, ranks))

    def ranks(self, run_id: str) -> RanksResult:
        """The per-rank summary of a run, computed once (the ranks page, its twin and the rank compare share it)."""
        return self.memo.get(run_id, "ranks", lambda: compute_run_ranks(self.store, run_id, self.collectives(run_id)))

    def collectives(self, run_id: str) -> RunCollectives:
        """The collectives of a run matched across ranks, computed once (page, API twin, overlay links)."""
        return self.memo.get(run_id, "collectives", lambda: compute_run_collectives(self.store, run_id))

    def has_collectives(self, run_id: str) -> bool:
        """Whether the run nav shows the Collectives tab: a slice named like a collective execution (not the
        matching itself, which a page of a large run would otherwise wait for)."""
        return self.memo.get(run_id, "has_collectives", lambda: has_executions(self.store.table(run_id, "slices")))

    def advice(self, run_id: str) -> AdviceResult:
        """The advisor's findings of a run, computed once (the findings page, its twin and the overview share it)."""
        ranks = self.ranks(run_id) if len(run_ranks(self.store.table(run_id, "tracks"))) > 1 else None
        return self.memo.get(run_id, "advice", lambda: compute_run_advice(self.store, run_id, self.breakdown(run_id),
                                                                          ranks, self.kernels(run_id)))

    def device_view(self, rec: RunRecord, profile: DeviceProfileJson) -> DeviceView:
        """A device profile's whole-profile page data, computed once per profile (the device page, its
        twin, the summary without a window and the compare page share it)."""
        return self.device_memo.get(rec.id, f"device/{profile['profile_id']}",
                             lambda: compute_device_view(self.store, rec, profile))

    def device_timeline(self, run_id: str) -> DeviceTimeline | None:
        """The device tracks of a run's Neuron device profiles (their tables loaded once), None without any."""
        return self.memo.get(run_id, "device_timeline", lambda: load_device_timeline(self.store, run_id))

    def device_index(self, run_id: str, origin_ns: int, by: str = "opcode") -> TimelineIndex | None:
        """The LOD index over a run's device tracks (slice ids run-wide), their slices named by opcode or
        by PyTorch op (`by`); None without device profiles."""
        def build() -> TimelineIndex | None:
            dt = self.device_timeline(run_id)
            return None if dt is None else build_device_index(dt, origin_ns, by)

        return self.memo.get(run_id, f"device_index:{by}", build)

    def warm_latest(self, count: int) -> None:
        try:
            records, _ = self.store.catalog.list(status="ready", limit=count)
        except Exception:  # e.g. the catalog closed under a short-lived app: nothing to warm
            log.debug("no runs to warm", exc_info=True)
            return
        for rec in records:
            self.warm(rec.id)

    def warm(self, run_id: str) -> None:
        """Build a fresh run's timeline index (and its device tracks' index) now (ingest worker), not on
        its first view; for a run of several ranks, its per-rank summary and matched collectives too (seconds
        on a 64-rank run: the ranks page and the collectives table then answer from memory)."""
        try:
            rec = self.store.get(run_id)
            self.timeline_index(run_id, rec.summary.start_ns)
            self.device_index(run_id, rec.summary.start_ns)
            if len(run_ranks(self.store.table(run_id, "tracks"))) > 1:
                self.ranks(run_id)
                self.collectives(run_id)
        except Exception:  # a cache warm-up must never turn a good ingest into an error
            log.exception("warming the timeline index of run %s failed", run_id)
