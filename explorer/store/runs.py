"""RunStore: the catalog plus the runs' files, one immutable folder of Parquet tables per run in the run
storage, published whole (visible only once one catalog transaction marks it ready, so a crash leaves no
half run). Runs on object storage are read through a local cache. Publication: docs/architecture.md,
"store/runs.py"."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from explorer.analysis.op_stats import device_time_summary
from explorer.config import Settings
from explorer.errors import RunNotFound, RunNotReady, StorageUnavailable
from explorer.model.artifacts import Artifact
from explorer.model.split import CPU_KEY, SPLIT_KEY, TimeSplit
from explorer.model.summary import RunSummary
from explorer.model.tables import TABLE_SCHEMAS, IngestedTrace, OrderedText
from explorer.store.budget import MemoryBudget
from explorer.store.catalog.catalog import LEASE_S, Catalog, Lease, RunRecord
from explorer.store.device import load_device_profiles, load_device_table, save_device_profiles
from explorer.store.memo import RunMemo
from explorer.store.neuron_devices import MAX_DEVICE_NAME, neuron_ls_devices, summary_text_devices
from explorer.store.parquet import ROW_GROUP_ROWS, ahead, parquet_options, write_schema
from explorer.store.run_copies import RunCopies
from explorer.store.storage import FolderStorage, Storage, answering, new_attempt, open_storage
from explorer.store.table_cache import TableCache

log = logging.getLogger(__name__)

# columns the in-memory cache keeps; args (the bulk of the bytes) are read per event on demand
CACHED_SLICE_COLUMNS = ["slice_id", "track_id", "ts_ns", "dur_ns", "depth", "parent_id", "name", "cat", "lane",
                        "op_id", "is_op", "device_time", "correlation", "external_id"]
UNFINISHED = ("queued", "ingesting")
DEFAULT_COPIES_BYTES = 20 * 2**30  # Settings.cache_disk_mb's default
STALE_ADDITION_S = 3600  # a half-written addition to a run's folder older than this is a killed process's (add_to_run)
# RunStore.save's `beside`: a step's name (in the run's time split) and what writes into the run's folder
Beside = tuple[str, Callable[[Path, IngestedTrace], None]]


class RunStore:
    """Catalog + run files, with a local data folder for scratch and caches."""

    def __init__(self, data_dir: Path, cache_runs: int = 4, op_table_cache: int = 8, catalog_url: str = "",
                 storage: Storage | None = None, cache_memory_mb: int | None = None) -> None:
        """`cache_runs`: runs whose tables stay in memory; `op_table_cache`: op tables computed on load
        (grouped by module, or of runs stored before op tables had a kind) kept in `derived`; `cache_memory_mb`:
        what those, and the memos given `budget`, hold together at most (None: no limit but the counts);
        `catalog_url`: the catalog database (Settings.catalog_url), empty for catalog.sqlite in the folder;
        `storage`: where the runs' files are (Settings.storage), None for the data folder itself."""
        self.data_dir = data_dir
        self.storage = storage or FolderStorage(data_dir)
        self.tmp_dir = data_dir / "tmp"  # local scratch: ingest inputs, and runs being written for object storage
        self.cache_dir = data_dir / "cache"  # local copies of runs on object storage (a cache only)
        self.staging_dir = self.storage.staging_dir(self.tmp_dir)
        local_runs = self.storage.local_path("runs")
        self._in_place = local_runs is not None  # a folder: runs are read where they are, no copy
        self.runs_dir = local_runs if local_runs is not None else self.cache_dir / "runs"
        for folder in (self.runs_dir, self.tmp_dir, self.staging_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.catalog = Catalog(catalog_url or data_dir / "catalog.sqlite")
        self.budget = MemoryBudget(None if cache_memory_mb is None else cache_memory_mb * 2**20)
        self._cache = TableCache(cache_runs, self.budget)
        self.copies = RunCopies(self.cache_dir, DEFAULT_COPIES_BYTES)  # object storage only; from_settings sizes it
        self.derived = RunMemo(op_table_cache, self.budget)
        # where a run's timeline index is kept as files (Settings.index_files): "first_build", "ingest" or "off"
        self.index_files = "first_build"

    @classmethod
    def from_settings(cls, settings: Settings) -> RunStore:
        storage = open_storage(settings.storage, settings.data_dir, endpoint_url=settings.s3_endpoint_url,
                               region=settings.s3_region)
        store = cls(settings.data_dir, settings.cache_runs, settings.op_table_cache, settings.catalog_url, storage,
                    settings.cache_memory_mb)
        store.copies.max_bytes = settings.cache_disk_mb * 2**20
        store.index_files = settings.index_files
        return store

    def recover(self, held: Callable[[], Collection[str] | None] | None = None) -> int:
        """After a crash: runs left queued/ingesting by a process that is gone become failed, and temp
        folders are removed — unless some ingest is alive (a CLI ingest while a server starts on the same
        data folder): its run and its scratch files are left alone. `held`: with a job queue (explorer.runs.jobs),
        the runs it holds (None: no queue); those, and runs queued less than LEASE_S ago (their job on its way), are alive too:
        a queued run holds no lease, and another process starting must not fail it. Then the storage of runs
        that are gone or failed is swept (`sweep`)."""
        n = 0
        live: set[str] = set()
        unfinished = self.catalog.unfinished()
        holding = held() if held is not None and unfinished else None
        queued = set(holding) if holding is not None else None
        for rec in unfinished:
            lease = self.catalog.lease(rec.id)
            if lease is not None and lease.alive():
                live.add(rec.id)
                continue
            if queued is not None and (rec.id in queued or (rec.status == "queued"
                                                          and time.time() - rec.updated_at < LEASE_S)):
                live.add(rec.id)
                continue
            who = f" (pid {lease.pid} on {lease.host})" if lease else ""
            self.catalog.update(rec.id, status="failed",
                                message=f"interrupted: the process ingesting it stopped{who}; ingest it again")
            n += 1
        if not live:
            for leftover in self.tmp_dir.iterdir():
                shutil.rmtree(leftover, ignore_errors=True)
        if self.staging_dir != self.tmp_dir:  # shared by every machine on the folder: only dead runs' staging
            for leftover in self.staging_dir.iterdir():
                if leftover.name not in live:
                    shutil.rmtree(leftover, ignore_errors=True)
        self.copies.sweep_parts()
        self.sweep(attempts=False)
        if not self._in_place:  # copies of runs deleted, or re-published, since this folder cached them
            self.copies.keep_only({run_key(rid, location) for rid, (status, location)
                                   in self.catalog.locations().items() if status == "ready"})
        return n

    def recover_dead_ingests(self) -> int:
        """What a killed ingest (kill -9, the OOM killer) left, for any process that opens the data folder (every CLI
        command): each unfinished run whose lease holder is gone (holder_gone) is marked failed, saying the ingest
        was killed, and its scratch (scratch_dir, its staging folder) removed. Nothing else, unlike recover: a run
        without a lease (a live server's queued upload) and other scratch (an upload being received) may be a
        running server's. Returns how many runs were failed."""
        n = 0
        for rec in self.catalog.unfinished():
            lease = self.catalog.lease(rec.id)
            if lease is None or not holder_gone(lease):
                continue
            self.catalog.update(rec.id, status="failed", message=(
                f"interrupted: the ingest process (pid {lease.pid} on {lease.host}) was killed before it finished "
                "(kill -9, or out of memory); ingest it again"))
            self.discard_scratch(rec.id)
            log.warning("run %s: its ingest process (pid %d on %s) is gone; marked failed", rec.id, lease.pid,
                        lease.host)
            n += 1
        return n

    def scratch_dir(self, run_id: str) -> Path:
        """The run's ingest scratch (decompressed inputs, spilled buffers): tmp/ingest-<id>, named by the run so
        that recover_dead_ingests finds what a killed ingest left."""
        return self.tmp_dir / f"ingest-{run_id}"

    def discard_scratch(self, run_id: str) -> None:
        """Remove the run's ingest scratch and its staging folder (a half-written run)."""
        shutil.rmtree(self.scratch_dir(run_id), ignore_errors=True)
        shutil.rmtree(self.staging_dir / run_id, ignore_errors=True)

    def sweep(self, attempts: bool = True) -> list[str]:
        """Remove from storage what no catalog record references: the files of runs deleted or failed, and
        (`attempts`, on object storage) every attempt of a ready run but the published one. Runs being
        ingested are left alone. Returns the keys removed.

        Storage is listed before the catalog is read: a run's record exists before any of its files do, so
        a run that shows up in the listing has its record in the snapshot read after it."""
        with answering(self.storage, "sweeping unreferenced runs"):
            listed = self.storage.list("runs")
            known = self.catalog.locations()
            removed: list[str] = []
            for run_id in listed:
                status, location = known.get(run_id, ("", ""))
                if status in UNFINISHED:
                    continue
                if status != "ready":
                    removed.append(f"runs/{run_id}")
                elif attempts and self.storage.attempts:
                    keep = run_key(run_id, location)
                    removed += [k for k in (f"runs/{run_id}/{a}" for a in self.storage.list(f"runs/{run_id}"))
                                if k != keep]
            for key in removed:
                log.info("sweeping %s from %s: no run references it", key, self.storage.url)
                self.storage.delete(key)
        return removed

    def location(self, rec: RunRecord) -> str:
        """The storage key of a ready run's folder."""
        return run_key(rec.id, rec.location)

    def run_dir(self, run_id: str) -> Path:
        """The run's folder on this machine: in place for a folder storage, else the local cache of it
        (filled from storage on first use; artifacts/ is not fetched — see fetch_run)."""
        if self._in_place:
            return self.runs_dir / run_id
        return self._cached(self.require_ready(run_id))

    def _cached(self, rec: RunRecord) -> Path:
        location = self.location(rec)

        def fetch(folder: Path) -> None:
            with answering(self.storage, f"fetching run {rec.id}"):
                self.storage.get_tree(location, folder, exclude=("artifacts",))
            if not (folder / "run.json").is_file():
                raise StorageUnavailable(f"run {rec.id}'s files are missing from {self.storage.url} ({location})")

        return self.copies.get(location, fetch)

    def add_to_run(self, run_id: str, name: str, write: Callable[[Path], None]) -> Path | None:
        """Add a folder of derived files, `name`, to a ready run's own folder (the timeline index, built on a run's
        first view: explorer.runs.run.timeline_index). `write(folder)` fills a new folder beside, which then takes the
        name at once (replacing one already there), so a reader never sees a half-written one. Returns its path, or
        None where the run's folder is not its own (object storage: a local copy, which the copies' size bound
        does not expect to grow) or the write failed (logged; nothing of it left)."""
        if not self._in_place:
            return None
        run = self.runs_dir / run_id
        if not run.is_dir():  # (deleted meanwhile: nothing to add to, and nothing to make again)
            return None
        final, fresh, old = run / name, run / f".{name}.{uuid.uuid4().hex}", run / f".{name}.old.{uuid.uuid4().hex}"
        try:
            for stale in run.glob(f".{name}.*"):  # what a process killed in a write left, an hour ago or more
                if time.time() - stale.stat().st_mtime > STALE_ADDITION_S:
                    shutil.rmtree(stale, ignore_errors=True)
            write(fresh)
            try:
                fresh.rename(final)
            except OSError:  # one is there (a damaged one, or another process's: the same files)
                final.rename(old)
                fresh.rename(final)
        except Exception:
            log.warning("could not add %s to run %s's folder", name, run_id, exc_info=True)
            shutil.rmtree(fresh, ignore_errors=True)
            return None
        finally:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def fetch_run(self, run_id: str, local_dir: Path, artifacts: bool = True) -> None:
        """Copy a ready run's files (artifacts too unless told otherwise) into `local_dir`, streamed."""
        rec = self.require_ready(run_id)
        self.storage.get_tree(self.location(rec), local_dir, exclude=() if artifacts else ("artifacts",))

    def table_urls(self, run_ids: Sequence[str], name: str) -> dict[str, str]:
        """Run id -> where its table `name` is, for a reader that reads in place (DuckDB with the storage's
        `duckdb_filesystem()` registered): local paths for a folder, s3:// URLs for S3. One catalog query."""
        if self._in_place:
            return {rid: str(self.table_path(rid, name)) for rid in run_ids}
        known = self.catalog.locations()
        urls = {}
        for rid in run_ids:
            status, location = known.get(rid, ("", ""))
            if status == "ready":
                urls[rid] = self.storage.url_of(f"{run_key(rid, location)}/{name}.parquet")
        return urls

    def get(self, run_id: str) -> RunRecord:
        return self.catalog.get(run_id)

    def require_ready(self, run_id: str) -> RunRecord:
        rec = self.catalog.get(run_id)
        if rec.status != "ready":
            raise RunNotReady(f"run {run_id} is {rec.status}" + (f": {rec.message}" if rec.message else ""))
        return rec

    def save(self, run_id: str, trace: IngestedTrace, artifacts: list[Artifact], copy_artifacts: bool = True,
             beside: Beside | None = None) -> RunSummary:
        """Write a run, publish it to storage whole, then mark it ready with its location in one catalog
        transaction. Returns the summary stored in the catalog. On any failure nothing of it stays
        published (and what a killed process left is unreferenced, for the sweep). `beside`: (step name, writer)
        of more files into the run's folder, made on a thread once the slices' Parquet is written (the timeline
        index: explorer.runs.ingest, Settings.index_files)."""
        work = self.staging_dir / run_id
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        key = f"runs/{run_id}/{new_attempt()}" if self.storage.attempts else f"runs/{run_id}"
        try:
            summary = self._write(work, trace, artifacts, copy_artifacts, beside)
            self.storage.publish(work, key)
            self.catalog.update(run_id, status="ready", progress=1.0, message="", summary=summary, location=key)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            try:
                self.storage.delete(key)
            except Exception:  # the sweep removes it later; the first error is the one to report
                log.exception("could not remove %s from %s after a failed publication", key, self.storage.url)
            raise
        return summary

    def _write(self, work: Path, trace: IngestedTrace, artifacts: list[Artifact], copy_artifacts: bool,
               beside: Beside | None) -> RunSummary:
        timed = TimeSplit()
        # the artifacts are copied (and made durable, for a folder store) beside the tables' write: kernel
        # copies and disk waits, outside the GIL (the 1M-event trace: ~0.35 s of fsync at publish before). What
        # is `beside` (the timeline index) is made once the slices' Parquet is written: beside that write, the two
        # builds' buffers together put the 1M-event file's peak 1.46x -> 1.63-1.66x (docs/benchmarks.md)
        slices_written, failed = threading.Event(), threading.Event()
        with ThreadPoolExecutor(2, thread_name_prefix="beside-write") as pool:
            copied = pool.submit(_copy_artifacts, work, artifacts, copy_artifacts,
                                 isinstance(self.storage, FolderStorage))
            extra = None if beside is None else pool.submit(_write_beside, work, trace, timed, beside, slices_written,
                                                             failed)
            try:
                with timed.step("write"):
                    for name, table in trace.tables.items():
                        _write_table(work, name, table, trace)
                        if name == "slices":
                            slices_written.set()
            except BaseException:
                failed.set()  # (`beside`, if not begun yet, does not begin)
                raise
            finally:
                slices_written.set()
            art_rows = copied.result()
            if extra is not None:
                extra.result()
        for key, step in ((SPLIT_KEY, timed.ns), (CPU_KEY, timed.cpu)):  # when the ingest timed itself
            if isinstance(recorded := trace.meta.get(key), dict):
                recorded.update(step)
        save_device_profiles(work, trace.device_profiles)
        summary = build_summary(trace, art_rows)
        (work / "run.json").write_text(json.dumps({"summary": summary.stored(), "meta": _jsonable(trace.meta)}))
        return summary

    def delete(self, run_id: str) -> None:
        """Forget the run, then remove its files from storage and from this machine's cache (a failure
        there leaves files no record references, which the sweep removes)."""
        self.catalog.get(run_id)
        self._cache.forget(run_id)
        self.derived.forget(run_id)
        self.catalog.delete(run_id)
        self.storage.delete(f"runs/{run_id}")
        shutil.rmtree(self.cache_dir / "runs" / run_id, ignore_errors=True)
        shutil.rmtree(self.staging_dir / run_id, ignore_errors=True)

    def table(self, run_id: str, name: str) -> pa.Table:
        """A run's table, cached in memory (runs are immutable). Slices come without args."""
        if (cached := self._cache.get(run_id, name)) is not None:
            return cached
        path = self.run_dir(run_id) / f"{name}.parquet"
        if not path.exists():
            self.require_ready(run_id)
            raise RunNotFound(run_id)
        columns = CACHED_SLICE_COLUMNS if name == "slices" else None
        table = pq.read_table(path, columns=columns)
        self._cache.put(run_id, name, table)
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
        if (cached := self._cache.get(run_id, key)) is not None:
            return cached
        self.require_ready(run_id)
        loaded = load_device_table(self.run_dir(run_id), profile_id, table)
        self._cache.put(run_id, key, loaded)
        return loaded

    def run_json(self, run_id: str) -> dict[str, Any]:
        path = self.run_dir(run_id) / "run.json"
        if not path.exists():
            self.require_ready(run_id)
        data: dict[str, Any] = json.loads(path.read_text())
        return data


def holder_gone(lease: Lease, now: float | None = None) -> bool:
    """Whether the process holding an ingest lease is gone: on this host, its process id is not running (however
    recent its heartbeat: it was killed); on another, its heartbeat is older than LEASE_S. A live holder whose
    heartbeat lags (a long stretch holding the GIL) is not gone."""
    if lease.host == socket.gethostname():
        try:
            os.kill(lease.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # another user's process: running
            return False
        return False
    return (now or time.time()) - lease.heartbeat_at > LEASE_S


def run_key(run_id: str, location: str) -> str:
    """The storage key of a run's folder: its catalog location, or runs/<id> for runs stored before the
    catalog recorded locations."""
    return location or f"runs/{run_id}"


def _write_slices(path: Path, slices: pa.Table, args: OrderedText) -> None:
    """The slices table with its args column joined from outside memory, one row group at a time (so the
    row groups are ROW_GROUP_ROWS long, as slice_rows expects, and only a group or two's args are held), the
    next group made while the last is encoded."""
    schema = write_schema(slices, TABLE_SCHEMAS["slices"])
    options = {k: v for k, v in parquet_options(TABLE_SCHEMAS["slices"]).items() if k != "row_group_size"}

    def groups() -> Iterator[pa.Table]:
        lo = 0
        for part in args.batches(ROW_GROUP_ROWS):
            yield slices.slice(lo, len(part)).append_column("args", part).cast(schema)
            lo += len(part)
        if lo != slices.num_rows:
            raise ValueError(f"slice args: {lo} values for {slices.num_rows} slices")

    with pq.ParquetWriter(path, schema, store_schema=False, **options) as writer:
        for group in ahead(groups()):
            writer.write_table(group, row_group_size=ROW_GROUP_ROWS)
        if not slices.num_rows:
            writer.write_table(schema.empty_table())


def _write_table(work: Path, name: str, table: pa.Table, trace: IngestedTrace) -> None:
    if name == "slices" and trace.slice_args is not None:
        _write_slices(work / "slices.parquet", table, trace.slice_args)
    elif name == "slices":
        written = write_schema(table, TABLE_SCHEMAS[name])
        pq.write_table(table.cast(written), work / f"{name}.parquet", store_schema=False,
                       **parquet_options(TABLE_SCHEMAS[name]))
    else:
        pq.write_table(table.cast(TABLE_SCHEMAS[name]), work / f"{name}.parquet",
                       **parquet_options(TABLE_SCHEMAS[name]))


def _write_beside(work: Path, trace: IngestedTrace, timed: TimeSplit, beside: Beside,
                  slices_written: threading.Event, failed: threading.Event) -> None:
    """RunStore.save's `beside`, once the slices' Parquet is written; not at all when the write failed."""
    slices_written.wait()
    if failed.is_set():
        return
    step, write = beside
    with timed.step(step):
        write(work, trace)


def _copy_artifacts(work: Path, artifacts: list[Artifact], copy: bool, durable: bool) -> list[dict[str, Any]]:
    """The run's artifacts into work/artifacts (when `copy`; fsynced when `durable`), as their summary rows."""
    rows = []
    if artifacts:
        (work / "artifacts").mkdir()
    for i, art in enumerate(artifacts):
        stored = f"{i:03d}_{_safe_filename(art.name)}"
        if copy:
            shutil.copyfile(art.path, work / "artifacts" / stored)
            if durable:
                with (work / "artifacts" / stored).open("rb") as fh:
                    os.fsync(fh.fileno())
        rows.append({"name": art.name, "stored_as": stored, "size": art.size, "sha256": art.sha256})
    return rows


def build_summary(trace: IngestedTrace, artifacts: list[dict[str, Any]]) -> RunSummary:
    slices = trace.tables["slices"]
    per_lane = {str(r["values"]): int(r["counts"]) for r in pc.value_counts(slices.column("lane")).to_pylist()} \
        if slices.num_rows else {}
    start, end = _meta_int(trace.meta, "start_ns"), _meta_int(trace.meta, "end_ns")
    # all the data, profiler markers included (explorer.model.markers); the span is the real events'
    extent = (min(start, _meta_int(trace.meta, "extent_start_ns", start)),
              max(end, _meta_int(trace.meta, "extent_end_ns", end)))
    return RunSummary.model_validate({
        "start_ns": start, "end_ns": end, "span_ns": end - start, "extent_start_ns": extent[0],
        "extent_end_ns": extent[1], "slices": slices.num_rows,
        "slices_per_lane": dict(sorted(per_lane.items())), "tracks": trace.tables["tracks"].num_rows,
        "flows": trace.tables["flows"].num_rows, "counters": trace.tables["counters"].num_rows,
        "instants": trace.tables["instants"].num_rows, "warnings": [asdict(w) for w in trace.warnings],
        "warning_count": sum(w.count for w in trace.warnings), "artifacts": artifacts,
        "device": device_time_summary(slices, trace.tables["flows"]), "files": _jsonable(trace.meta.get("files", [])),
        "devices": run_devices(trace),
        **({"neuron_files": _jsonable(trace.meta["neuron_files"])} if trace.meta.get("neuron_files") else {}),
    })


def run_devices(trace: IngestedTrace) -> list[dict[str, Any]]:
    """The run's device models: each file's Kineto `deviceProperties[].name` (distinct devices by the
    file's host name and the device id; files without a host name count as one host), then each Neuron device profile's `Metadata.instance_type` (distinct
    instances). Names in order of first appearance."""
    seen: dict[tuple[str, str], set[tuple[str, str]]] = {}
    files = trace.meta.get("files", [])
    for f in files if isinstance(files, list) else []:
        props = f.get("device_properties") if isinstance(f, dict) else None
        for i, d in enumerate(props if isinstance(props, list) else []):
            if isinstance(d, dict) and str(d.get("name") or "").strip():
                key = (str(f.get("host_name") or ""), str(d.get("id", i)))  # rank files of one host repeat it
                seen.setdefault((str(d["name"]).strip()[:MAX_DEVICE_NAME], "deviceProperties"), set()).add(key)
    for p in trace.device_profiles:
        meta = p.tables.get("Metadata")
        if meta is not None and meta.num_rows and "instance_type" in meta.column_names:
            kind = str(meta.column("instance_type")[0].as_py() or "").strip()[:MAX_DEVICE_NAME]
            if kind:
                seen.setdefault((kind, "neuron Metadata"), set()).add((p.instance_id, ""))
    out = [{"name": name, "count": len(keys), "source": src} for (name, src), keys in seen.items()]
    listed = neuron_ls_devices(files if isinstance(files, list) else []) + out
    return listed + summary_text_devices(trace, listed)



def _meta_int(meta: dict[str, object], key: str, default: int = 0) -> int:
    value = meta.get(key, default)
    return value if isinstance(value, int) else int(str(value))


def _safe_filename(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in name.replace("/", "__"))
    return keep.strip(".")[:120] or "file"


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
