"""A ready run and what is derived from it, each computed once: the one object the API, the notebook, the report
and the CLI ask for a run's timeline index, breakdown, kernels, collectives, ranks and device tracks (HTA's
`TraceAnalysis`, datasette's `Database`). `RunCache` hands out `Run`s that share one memo per server."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from explorer.analysis.breakdown import compute_breakdown
from explorer.analysis.collectives import args_names, collective_row, compute_collectives, has_executions
from explorer.analysis.device.tracks import (
    TRACK_TABLES,
    DeviceTimeline,
    build_device_index,
    build_device_timeline,
)
from explorer.analysis.kernels import KernelTable, compute_kernel_table
from explorer.analysis.rank_slices import RankSlices, check_ranks, rank_key, restrict_to_ranks
from explorer.analysis.ranks import compute_ranks
from explorer.analysis.steps import DEFAULT_STEP_ANNOTATION, compute_steps
from explorer.analysis.timeline.index import TimelineIndex, build_timeline_index
from explorer.config import Settings
from explorer.model.ranks import run_ranks
from explorer.model.shapes import Breakdown, CollectiveMismatch, CollectiveRow, RanksResult, StepsResult
from explorer.model.summary import RunSummary
from explorer.store.catalog.catalog import RunRecord
from explorer.store.index_files import FILES_FROM_SLICES, INDEX_DIR, load_timeline_index, save_timeline_index
from explorer.store.memo import RunMemo
from explorer.store.queries import load_op_slices
from explorer.store.runs import RunStore

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass
class RunCollectives:
    """A run's matched collectives (API rows, relative ns) and mismatches, computed once per run."""

    rows: list[CollectiveRow]
    mismatches: list[CollectiveMismatch]


@dataclass(frozen=True)
class Run:
    """A ready run of a store. Every derived value is built on first use and kept in `memo` (a server's RunMemo,
    shared by all its requests; a private one for a notebook or a CLI command)."""

    store: RunStore
    record: RunRecord
    memo: RunMemo = field(default_factory=RunMemo)
    device_memo: RunMemo | None = None  # device pages' whole-profile data (Settings.device_cache_entries)

    @classmethod
    def of(cls, store: RunStore, run_id: str) -> Run:
        """A ready run with a memo of its own (RunNotFound, RunNotReady otherwise)."""
        return cls(store, store.require_ready(run_id))

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def summary(self) -> RunSummary:
        return self.record.summary

    @property
    def origin_ns(self) -> int:
        """Every timeline-facing time is relative to it (docs/API.md "Times")."""
        return self.record.summary.start_ns

    @property
    def span_ns(self) -> int:
        return self.record.summary.span_ns

    def default_window(self) -> tuple[int, int]:
        """The timeline's first window, relative ns: the whole span (at least 1 ns)."""
        return 0, max(self.span_ns, 1)

    def table(self, name: str) -> pa.Table:
        return self.store.table(self.id, name)

    def rank_ids(self) -> list[int]:
        """The run's ranks (one, 0, for a single-process trace)."""
        return run_ranks(self.table("tracks"))

    def cached(self, key: str, build: Callable[[], T]) -> T:
        """A value derived from this run, built once (the layers above keep their page data here too)."""
        return self.memo.get(self.id, key, build)

    def cached_device(self, key: str, build: Callable[[], T]) -> T:
        return (self.device_memo or self.memo).get(self.id, key, build)

    def timeline_index(self) -> TimelineIndex:
        return self.cached("timeline", lambda: timeline_index(self.store, self.id, self.origin_ns))

    def breakdown(self, ranks: tuple[int, ...] | None = None) -> Breakdown:
        """Lane busy/idle and device gaps of the run, or of some of its ranks (busy time theirs, idle against the
        run's span, gap neighbours named by their slice ids in the run)."""
        return self.cached("breakdown" + rank_key(ranks), lambda: self._breakdown(ranks))

    def _breakdown(self, ranks: tuple[int, ...] | None) -> Breakdown:
        s = self.summary
        if ranks is None:
            return compute_breakdown(self.table("slices"), self.table("tracks"), self.table("flows"), s.start_ns,
                                     s.end_ns)
        sub = self.rank_subset(ranks, self.table("flows"))
        result = compute_breakdown(sub.slices, sub.tracks, sub.flows, s.start_ns, s.end_ns)
        for gap in result["gaps"]["largest"]:
            for side in ("before", "after"):
                gap[side]["slice_id"] = int(sub.kept[gap[side]["slice_id"]])
        return result

    def rank_subset(self, ranks: tuple[int, ...], flows: pa.Table | None = None) -> RankSlices:
        """The cached slice columns of some ranks, renumbered as a run of their own; a rank the run does not
        have is a BadRequest."""
        tracks = self.table("tracks")
        check_ranks(ranks, run_ranks(tracks))
        return restrict_to_ranks(self.table("slices"), tracks, flows, ranks)

    def kernels(self, ranks: tuple[int, ...] | None = None) -> KernelTable:
        """The kernel table of the run (or of some of its ranks): the cached slice columns plus the args of its
        device executions, read from Parquet (only those rows' args)."""
        return self.cached("kernels" + rank_key(ranks), lambda: self._kernels(ranks))

    def _kernels(self, ranks: tuple[int, ...] | None) -> KernelTable:
        args = pq.read_table(self.store.table_path(self.id, "slices"), columns=["args", "track_id"],
                             filters=[("device_time", "=", True)])
        if ranks is None:
            return compute_kernel_table(self.table("slices"), args.column("args"))
        sub = self.rank_subset(ranks)
        mine = np.isin(args.column("track_id").to_numpy(), sub.tracks.column("track_id").to_numpy())
        return compute_kernel_table(sub.slices, args.column("args").filter(pa.array(mine)))

    def steps(self, annotation: str = DEFAULT_STEP_ANNOTATION) -> StepsResult:
        """One row per (rank, step) on a multi-rank run, each rank's own device time."""
        s = self.summary
        return compute_steps(self.table("slices"), s.start_ns, s.end_ns, annotation, self.table("tracks"))

    def collectives(self) -> RunCollectives:
        """The collectives matched across ranks: the cached slice columns plus the args of the executions only
        (read from Parquet by name); a single-file run's tracks take its distributedInfo rank."""
        return self.cached("collectives", self._collectives)

    def _collectives(self) -> RunCollectives:
        slices = self.table("slices")
        names = args_names(slices)
        args: dict[int, str] = {}
        if names:
            t = pq.read_table(self.store.table_path(self.id, "slices"), columns=["slice_id", "args"],
                              filters=[("name", "in", names)])
            args = dict(zip(t.column("slice_id").to_pylist(), t.column("args").to_pylist(), strict=True))
        s = self.summary
        ranks = [f.get("distributed_info", {}).get("rank") for f in s.files
                 if isinstance(f.get("distributed_info"), dict)]
        default_rank = ranks[0] if len(ranks) == 1 and isinstance(ranks[0], int) else 0
        matched, mismatches = compute_collectives(slices, args, self.table("flows"), self.table("tracks"),
                                                  default_rank)
        return RunCollectives([collective_row(m, s.start_ns, s.span_ns) for m in matched], mismatches)

    def has_collectives(self) -> bool:
        """Whether the run nav shows the Collectives tab: a slice named like a collective execution (not the
        matching itself, which a page of a large run would otherwise wait for)."""
        return self.cached("has_collectives", lambda: has_executions(self.table("slices")))

    def ranks(self) -> RanksResult:
        """The per-rank summary; arrivals are the collectives page's."""
        def build() -> RanksResult:
            matched = self.collectives()
            return compute_ranks(load_op_slices(self.store, self.id), self.table("tracks"), self.origin_ns,
                                 matched.rows, matched.mismatches)

        return self.cached("ranks", build)

    def device_timeline(self) -> DeviceTimeline | None:
        """The device tracks of the run's Neuron device profiles (their tables loaded once), None without any."""
        return self.cached("device_timeline", lambda: load_device_timeline(self.store, self.id))

    def device_index(self, by: str = "opcode") -> TimelineIndex | None:
        """The LOD index over the device tracks (slice ids run-wide), their slices named by opcode or by PyTorch
        op (`by`); None without device profiles."""
        def build() -> TimelineIndex | None:
            devices = self.device_timeline()
            return None if devices is None else build_device_index(devices, self.origin_ns, by)

        return self.cached(f"device_index:{by}", build)

    def warm(self) -> None:
        """Build what a fresh run's first pages need now (after its ingest), not on their first view: the
        timeline index (and its device tracks'); for several ranks, the per-rank summary and collectives."""
        self.timeline_index()
        self.device_index()
        if len(self.rank_ids()) > 1:
            self.ranks()


@dataclass
class RunCache:
    """The server's runs: each `Run` it hands out shares one memo (an LRU sized by settings)."""

    store: RunStore
    memo: RunMemo = field(default_factory=RunMemo)
    device_memo: RunMemo = field(default_factory=RunMemo)

    @classmethod
    def for_store(cls, store: RunStore, settings: Settings) -> RunCache:
        """The memos sized by settings, under the store's memory budget."""
        return cls(store, RunMemo(settings.derived_cache_entries, store.budget),
                   RunMemo(settings.device_cache_entries, store.budget))

    def of(self, record: RunRecord) -> Run:
        return Run(self.store, record, self.memo, self.device_memo)

    def get(self, run_id: str) -> Run:
        """A ready run (RunNotFound, RunNotReady otherwise)."""
        return self.of(self.store.require_ready(run_id))

    def forget(self, run_id: str) -> None:
        """Drop what was derived from a run (deleted, or replaced)."""
        self.memo.forget(run_id)
        self.device_memo.forget(run_id)

    def warm(self, run_id: str) -> None:
        """Build a fresh run's first pages' data now (after its ingest), not on their first view (Run.warm)."""
        try:
            self.get(run_id).warm()
        except Exception:  # a cache warm-up must never turn a good ingest into an error
            log.exception("warming the timeline index of run %s failed", run_id)

    def warm_latest(self, count: int) -> None:
        """Warm the newest ready runs (ingested by the CLI, or before a restart)."""
        try:
            records, _ = self.store.catalog.list(status="ready", limit=count)
        except Exception:  # e.g. the catalog closed under a short-lived app: nothing to warm
            log.debug("no runs to warm", exc_info=True)
            return
        for rec in records:
            self.warm(rec.id)


def timeline_index(store: RunStore, run_id: str, origin_ns: int) -> TimelineIndex:
    """The run's timeline index, mapped from the run's folder where it is stored there (explorer/store/index_files.py:
    no build, and its pages are the page cache's), else built from the run's tables (seconds on millions of slices):
    into the run's folder, where the store keeps indexes as files (RunStore.index_files, "first_build") and the run is
    big enough for it to matter (FILES_FROM_SLICES), else in memory. Not cached here: `Run.timeline_index` is."""
    stored = load_timeline_index(store.run_dir(run_id) / INDEX_DIR, origin_ns)
    if stored is not None:
        return stored
    t = store.table
    tables = (t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "counters"), t(run_id, "flows"))
    instants = t(run_id, "instants")
    if store.index_files == "first_build" and tables[0].num_rows >= FILES_FROM_SLICES:
        folder = store.add_to_run(run_id, INDEX_DIR, lambda f: save_timeline_index(f, *tables, origin_ns, instants))
        if folder is not None and (written := load_timeline_index(folder, origin_ns)) is not None:
            return written
    return build_timeline_index(*tables, origin_ns, instants)


def load_device_timeline(store: RunStore, run_id: str) -> DeviceTimeline | None:
    """The device tracks of a run's Neuron device profiles (tables loaded from the store), None without any."""
    profiles = store.device_profiles(run_id)
    if not profiles.num_rows:
        return None
    tables = {p: {t: store.device_table(run_id, p, t) for t in TRACK_TABLES}
              for p in profiles.column("profile_id").to_pylist()}
    return build_device_timeline(profiles, tables, store.table(run_id, "tracks"), store.table(run_id, "slices"))
