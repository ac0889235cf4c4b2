"""RunStore: the data folder. One immutable folder of Parquet tables per run, plus the catalog.

A run is written under `tmp/` and renamed into `runs/` only when every file is complete, so a
crash mid-ingest leaves no half run; start-up sweeps what an interrupted ingest left behind.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from explorer.config import Settings
from explorer.errors import RunNotFound, RunNotReady
from explorer.model.artifacts import Artifact
from explorer.model.op_stats import device_time_summary
from explorer.model.summary import RunSummary
from explorer.model.tables import TABLE_SCHEMAS, IngestedTrace, OrderedText
from explorer.store.catalog import LEASE_S, Catalog, RunRecord
from explorer.store.device import load_device_profiles, load_device_table, save_device_profiles
from explorer.store.memo import RunMemo

log = logging.getLogger(__name__)

ROW_GROUP_ROWS = 65536
# columns the in-memory cache keeps; args (the bulk of the bytes) are read per event on demand
CACHED_SLICE_COLUMNS = ["slice_id", "track_id", "ts_ns", "dur_ns", "depth", "parent_id", "name", "cat", "lane",
                        "op_id", "is_op", "device_time", "correlation", "external_id"]


class RunStore:
    """Catalog + run folders under one data directory."""

    def __init__(self, data_dir: Path, cache_runs: int = 4, op_table_cache: int = 8, catalog_url: str = "") -> None:
        """`cache_runs`: runs whose tables stay in memory; `op_table_cache`: op tables computed on load
        (grouped by module, or of runs stored before op tables had a kind) kept in `derived`;
        `catalog_url`: the catalog database (Settings.catalog_url), empty for catalog.sqlite in the folder."""
        self.data_dir = data_dir
        self.runs_dir = data_dir / "runs"
        self.tmp_dir = data_dir / "tmp"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(catalog_url or data_dir / "catalog.sqlite")
        self._cache: OrderedDict[str, dict[str, pa.Table]] = OrderedDict()
        self._cache_size = cache_runs
        self._cache_lock = threading.Lock()
        self.derived = RunMemo(op_table_cache)

    @classmethod
    def from_settings(cls, settings: Settings) -> RunStore:
        return cls(settings.data_dir, settings.cache_runs, settings.op_table_cache, settings.catalog_url)

    def recover(self, held: Callable[[], Collection[str]] | None = None) -> int:
        """After a crash: runs left queued/ingesting by a process that is gone become failed, and temp
        folders are removed — unless some ingest is alive (a CLI ingest while a server starts on the same
        data folder): its run and its scratch files are left alone. `held`: with a job queue (explorer.jobs),
        the runs it holds; those, and runs queued less than LEASE_S ago (their job on its way), are alive too:
        a queued run holds no lease, and another process starting must not fail it."""
        n = 0
        live = False
        unfinished = self.catalog.unfinished()
        queued = set(held()) if held is not None and unfinished else set()
        for rec in unfinished:
            lease = self.catalog.lease(rec.id)
            if lease is not None and lease.alive():
                live = True
                continue
            if held is not None and (rec.id in queued or (rec.status == "queued"
                                                          and time.time() - rec.updated_at < LEASE_S)):
                live = True
                continue
            who = f" (pid {lease.pid} on {lease.host})" if lease else ""
            self.catalog.update(rec.id, status="failed",
                                message=f"interrupted: the process ingesting it stopped{who}; ingest it again")
            n += 1
        if not live:
            for leftover in self.tmp_dir.iterdir():
                shutil.rmtree(leftover, ignore_errors=True)
        return n

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def get(self, run_id: str) -> RunRecord:
        return self.catalog.get(run_id)

    def require_ready(self, run_id: str) -> RunRecord:
        rec = self.catalog.get(run_id)
        if rec.status != "ready":
            raise RunNotReady(f"run {run_id} is {rec.status}" + (f": {rec.message}" if rec.message else ""))
        return rec

    def save(self, run_id: str, trace: IngestedTrace, artifacts: list[Artifact], copy_artifacts: bool = True) -> RunSummary:
        """Write a run atomically and mark it ready. Returns the summary stored in the catalog."""
        work = self.tmp_dir / run_id
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            started = time.perf_counter_ns()
            for name, table in trace.tables.items():
                if name == "slices" and trace.slice_args is not None:
                    _write_slices(work / "slices.parquet", table, trace.slice_args)
                else:
                    pq.write_table(table.cast(TABLE_SCHEMAS[name]), work / f"{name}.parquet", **PARQUET_OPTIONS)
            split = trace.meta.get("ingest_split_ns")  # explorer.ingest.split, when the ingest timed itself
            if isinstance(split, dict):
                split["write"] = time.perf_counter_ns() - started
            save_device_profiles(work, trace.device_profiles)
            art_rows = []
            if artifacts:
                (work / "artifacts").mkdir()
            for i, art in enumerate(artifacts):
                stored = f"{i:03d}_{_safe_filename(art.name)}"
                if copy_artifacts:
                    shutil.copyfile(art.path, work / "artifacts" / stored)
                art_rows.append({"name": art.name, "stored_as": stored, "size": art.size, "sha256": art.sha256})
            summary = build_summary(trace, art_rows)
            (work / "run.json").write_text(json.dumps({"summary": summary.stored(), "meta": _jsonable(trace.meta)}))
            for f in work.rglob("*"):
                if f.is_file():
                    with f.open("rb") as fh:
                        os.fsync(fh.fileno())
            os.replace(work, self.run_dir(run_id))
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        self.catalog.update(run_id, status="ready", progress=1.0, message="", summary=summary)
        return summary

    def delete(self, run_id: str) -> None:
        self.catalog.get(run_id)
        with self._cache_lock:
            self._cache.pop(run_id, None)
        self.derived.forget(run_id)
        shutil.rmtree(self.run_dir(run_id), ignore_errors=True)
        shutil.rmtree(self.tmp_dir / run_id, ignore_errors=True)
        self.catalog.delete(run_id)

    def table(self, run_id: str, name: str) -> pa.Table:
        """A run's table, cached in memory (runs are immutable). Slices come without args."""
        with self._cache_lock:
            tables = self._cache.get(run_id)
            if tables is not None:
                self._cache.move_to_end(run_id)
                if name in tables:
                    return tables[name]
        path = self.run_dir(run_id) / f"{name}.parquet"
        if not path.exists():
            self.require_ready(run_id)
            raise RunNotFound(run_id)
        columns = CACHED_SLICE_COLUMNS if name == "slices" else None
        table = pq.read_table(path, columns=columns)
        with self._cache_lock:
            tables = self._cache.setdefault(run_id, {})
            tables[name] = table
            self._cache.move_to_end(run_id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return table

    def table_path(self, run_id: str, name: str) -> Path:
        return self.run_dir(run_id) / f"{name}.parquet"

    def slice_rows(self, run_id: str, slice_ids: list[int]) -> list[dict[str, Any]]:
        """Full rows (args included) of a few slices, read from their row groups only."""
        pf = pq.ParquetFile(self.table_path(run_id, "slices"))
        out: dict[int, dict[str, Any]] = {}
        by_group: dict[int, list[int]] = {}
        for sid in slice_ids:
            if 0 <= sid < pf.metadata.num_rows:
                by_group.setdefault(sid // ROW_GROUP_ROWS, []).append(sid)
        for group, ids in by_group.items():
            t = pf.read_row_group(group)
            base = group * ROW_GROUP_ROWS
            for sid in ids:
                out[sid] = {k: v[0] for k, v in t.slice(sid - base, 1).to_pydict().items()}
        return [out[s] for s in slice_ids if s in out]

    def device_profiles(self, run_id: str) -> pa.Table:
        """The run's `device_profiles` table (explorer/model/device.py), empty when it has none."""
        self.require_ready(run_id)
        return load_device_profiles(self.run_dir(run_id))

    def device_table(self, run_id: str, profile_id: str, table: str) -> pa.Table:
        """One table of a device profile, by the export's table name, cached like the run's own tables;
        the published columns, empty, when the export lacked it."""
        key = f"device/{profile_id}/{table}"
        with self._cache_lock:
            cached = self._cache.get(run_id, {}).get(key)
        if cached is not None:
            return cached
        self.require_ready(run_id)
        loaded = load_device_table(self.run_dir(run_id), profile_id, table)
        with self._cache_lock:
            self._cache.setdefault(run_id, {})[key] = loaded
            self._cache.move_to_end(run_id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return loaded

    def run_json(self, run_id: str) -> dict[str, Any]:
        path = self.run_dir(run_id) / "run.json"
        if not path.exists():
            self.require_ready(run_id)
        data: dict[str, Any] = json.loads(path.read_text())
        return data


PARQUET_OPTIONS: dict[str, Any] = {"row_group_size": ROW_GROUP_ROWS, "compression": "zstd", "compression_level": 1}


def _write_slices(path: Path, slices: pa.Table, args: OrderedText) -> None:
    """The slices table with its args column joined from outside memory, one row group at a time (so the
    row groups are ROW_GROUP_ROWS long, as slice_rows expects, and only one group's args are held)."""
    schema = TABLE_SCHEMAS["slices"]
    options = {k: v for k, v in PARQUET_OPTIONS.items() if k != "row_group_size"}
    with pq.ParquetWriter(path, schema, **options) as writer:
        lo = 0
        for part in args.batches(ROW_GROUP_ROWS):
            group = slices.slice(lo, len(part)).append_column("args", part)
            writer.write_table(group.cast(schema), row_group_size=ROW_GROUP_ROWS)
            lo += len(part)
        if lo != slices.num_rows:
            raise ValueError(f"slice args: {lo} values for {slices.num_rows} slices")
        if not slices.num_rows:
            writer.write_table(schema.empty_table())


def build_summary(trace: IngestedTrace, artifacts: list[dict[str, Any]]) -> RunSummary:
    slices = trace.tables["slices"]
    per_lane = {str(r["values"]): int(r["counts"]) for r in pc.value_counts(slices.column("lane")).to_pylist()} \
        if slices.num_rows else {}
    start, end = _meta_int(trace.meta, "start_ns"), _meta_int(trace.meta, "end_ns")
    return RunSummary.model_validate({
        "start_ns": start, "end_ns": end, "span_ns": end - start, "slices": slices.num_rows,
        "slices_per_lane": dict(sorted(per_lane.items())), "tracks": trace.tables["tracks"].num_rows,
        "flows": trace.tables["flows"].num_rows, "counters": trace.tables["counters"].num_rows,
        "instants": trace.tables["instants"].num_rows, "warnings": [asdict(w) for w in trace.warnings],
        "warning_count": sum(w.count for w in trace.warnings), "artifacts": artifacts,
        "device": device_time_summary(slices), "files": _jsonable(trace.meta.get("files", [])),
    })


def _meta_int(meta: dict[str, object], key: str) -> int:
    value = meta.get(key, 0)
    return value if isinstance(value, int) else int(str(value))


def _safe_filename(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in name.replace("/", "__"))
    return keep.strip(".")[:120] or "file"


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
