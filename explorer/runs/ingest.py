"""Ingest as a unit of work: a catalog record, parse, atomic save; failure leaves no half run.

Shared by the CLI and the server's background worker, so both fail and report the same way.
"""

from __future__ import annotations

import errno
import logging
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from explorer.errors import DiskFull, ExplorerError, IngestBug
from explorer.ingest.limits import IngestLimits
from explorer.ingest.parts import Part
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import DEFAULT_MAX_BYTES, Inputs, collect_inputs
from explorer.model.split import SPLIT_KEY
from explorer.runs.records import combined_sha256, default_run_name, find_identical
from explorer.store.catalog.catalog import HEARTBEAT_S, RunRecord
from explorer.store.index_files import write_run_index
from explorer.store.runs import RunStore

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 0.5  # how often an ingest's progress reaches the catalog (the caller's callback hears every report)

Progress = Callable[[float, str], None]


def ingest_or_find(store: RunStore, paths: list[Path], name: str | None = None, *,
                   progress: Progress | None = None) -> RunRecord:
    """The ready run holding exactly these files, ingesting them only when no run does."""
    return find_identical(store, paths) or ingest_paths(store, paths, name, progress=progress)


def run_ingest(store: RunStore, run_id: str, paths: list[Path], *, keep_failed: bool,
               max_bytes: int = DEFAULT_MAX_BYTES, progress: Progress | None = None,
               limits: IngestLimits | None = None) -> RunRecord:
    """Ingest `paths` into the existing catalog record `run_id`. On error the record becomes
    `failed` with the message (keep_failed) or disappears, and the error is raised. Interrupted
    (Ctrl-C, SIGTERM through the CLI's handler), the run is marked failed whatever keep_failed says, so
    no run stays `ingesting`; killed outright, its lease lapses and the next process marks it failed."""

    written_at: float | None = None  # when a report last reached the catalog

    def report(fraction: float, what: str) -> None:
        # the catalog hears the first report (the run is `ingesting`) and then one per PROGRESS_EVERY_S: each is
        # a committed transaction (an fsync, ~5-25 ms on the dev box), and a small ingest made five of them
        nonlocal written_at
        if written_at is None or time.monotonic() - written_at >= PROGRESS_EVERY_S:
            store.catalog.update(run_id, status="ingesting", progress=round(fraction, 3), message=what)
            written_at = time.monotonic()
        if progress:
            progress(fraction, what)

    try:
        with holding_lease(store, run_id):
            ingest_into(store, run_id, paths, max_bytes, report, limits)
    except Exception as exc:
        error: Exception
        if is_disk_full(exc):  # its scratch and staging are gone already (ingest_into, save): there is room to say so
            error = disk_full(_full_folder(exc, store.tmp_dir), sum(_size(p) for p in paths), "this ingest")
            log.warning("ingest of run %s failed: %s", run_id, error.message)
        elif isinstance(exc, OSError):  # the machine (permissions), not a parser: raised as it is
            log.exception("ingest of run %s failed", run_id)
            error = exc
        else:
            error = exc if isinstance(exc, ExplorerError) else ingest_bug(store, run_id, paths, exc)
        message = error.message if isinstance(error, ExplorerError) else f"{type(error).__name__}: {error}"
        if keep_failed:
            store.catalog.update(run_id, status="failed", message=message)
        else:
            store.catalog.delete(run_id)
        if error is exc:
            raise
        raise error from exc
    except BaseException:  # KeyboardInterrupt, SystemExit from a signal handler
        store.catalog.update(run_id, status="failed", message="interrupted during ingest; ingest it again")
        raise
    return store.get(run_id)


def is_disk_full(exc: BaseException) -> bool:
    """A write that found no space (or quota) left: an OSError saying so, or a library's error wrapping one (Arrow,
    DuckDB and the decompressors say it in their message)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(exc) or "Disk quota exceeded" in str(exc)


def disk_full(folder: Path, needed: int | None, what: str) -> DiskFull:
    """The clear error for a full disk: the folder, what is free there now, and what `what` needs (at least)."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        free = 0
    need = f"; it needs at least {_mb(needed)} free there" if needed else ""
    return DiskFull(f"no space left in {folder} for {what} ({_mb(free)} free now{need}): free some space there, or "
                    "use a data folder on a larger disk, and try again; nothing of it was kept",
                    {"folder": str(folder), "free_bytes": free, "needed_bytes": needed})


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _full_folder(exc: BaseException, default: Path) -> Path:
    """The folder of the file a failed write named, else `default`."""
    name = getattr(exc, "filename", None)
    return Path(name).parent if isinstance(name, str) and name else default


def _size(path: Path) -> int:
    try:
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size
    except OSError:
        return 0


def ingest_into(store: RunStore, run_id: str, paths: list[Path], max_bytes: int, report: Progress,
                limits: IngestLimits | None, *, inputs: Inputs | None = None,
                parts: Callable[[Inputs], dict[int, Part]] | None = None) -> None:
    """Collect, parse and save `paths` as run `run_id`; the catalog hears the progress and, at the end, `ready`
    (failure is the caller's to record). The files are hashed beside the parse (Inputs.hashes); the split of
    the ingest's time goes to the run's meta (explorer.model.split): `inputs` (collecting, decompressing),
    `hash` (waiting for it). A queue's jobs (explorer.runs.jobs) pass `inputs` they collected already (removed
    here, as ours are) and `parts`: the members their parse jobs parsed, given the inputs."""
    report(0.0, "reading files")
    started = time.perf_counter_ns()
    scratch = None
    if inputs is None:  # scratch named by the run: what a killed ingest leaves is found (RunStore.recover_dead_ingests)
        scratch = store.scratch_dir(run_id)
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            inputs = collect_inputs(paths, max_bytes, scratch_root=scratch)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    collected = time.perf_counter_ns()
    try:
        trace = ingest_inputs(inputs, report, limits, parts=None if parts is None else parts(inputs))
        parsed = time.perf_counter_ns()
        store.catalog.update(run_id, sha256=combined_sha256(inputs.hashes()))
        split = trace.meta.setdefault(SPLIT_KEY, {})
        if isinstance(split, dict):
            split.update(inputs=collected - started, hash=time.perf_counter_ns() - parsed)
        report(0.95, "writing tables")
        beside = ("index", write_run_index) if store.index_files == "ingest" else None
        store.save(run_id, trace, inputs.artifacts, beside=beside)
    finally:
        inputs.cleanup()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def holding_lease(store: RunStore, run_id: str) -> Iterator[None]:
    """This process owns the run's ingest: the lease is renewed every HEARTBEAT_S from a thread while
    the body runs (parsing holds no catalog calls for long stretches) and dropped at the end."""
    store.catalog.take_lease(run_id)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(HEARTBEAT_S):
            try:
                store.catalog.renew_lease(run_id)
            except Exception:  # a busy or closed catalog: the next beat tries again
                log.warning("could not renew the ingest lease of run %s", run_id, exc_info=True)

    beat = threading.Thread(target=renew, name=f"lease-{run_id}", daemon=True)
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join(timeout=HEARTBEAT_S)
        store.catalog.drop_lease(run_id)


def ingest_bug(store: RunStore, run_id: str, paths: list[Path], exc: Exception) -> IngestBug:
    """The top-level guard: an exception that is not an ExplorerError is a bug in a parser. It becomes a
    one-line IngestBug naming the input; the bug report (the traceback) is logged at ERROR on this module's
    logger (tests/fuzz counts these records and fails on any) and written to bugs/<run id>.txt in the data
    folder, which the message names (the CLI keeps tracebacks off the terminal)."""
    log.error("bug: ingest of run %s (%s) raised %s", run_id, ", ".join(map(str, paths)), type(exc).__name__,
              exc_info=exc)
    report = store.data_dir / "bugs" / f"{run_id}.txt"
    try:
        report.parent.mkdir(exist_ok=True)
        report.write_text(f"ingest of {[str(p) for p in paths]}\n" + "".join(traceback.format_exception(exc)))
    except OSError:
        log.exception("could not write the bug report %s", report)
    names = ", ".join(p.name for p in paths)[:200] or "the upload"
    problem = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return IngestBug(f"{names}: internal error while reading ({problem}); this is a bug, its report is "
                     f"bugs/{run_id}.txt in the data folder")


def ingest_paths(store: RunStore, paths: list[Path], name: str | None = None, *, keep_failed: bool = False,
                 max_bytes: int = DEFAULT_MAX_BYTES, progress: Progress | None = None,
                 limits: IngestLimits | None = None) -> RunRecord:
    rec = store.catalog.create(name or default_run_name(paths), source=", ".join(p.name for p in paths))
    return run_ingest(store, rec.id, paths, keep_failed=keep_failed, max_bytes=max_bytes, progress=progress,
                      limits=limits)


#END
