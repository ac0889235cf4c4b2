"""Who ingests a server's uploads and watched files, behind one protocol: this server (each ingest in a process
of its own) or the workers of the PostgreSQL job queue. The upload route, the watcher and the app's start-up ask
the protocol, never which one it is."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from explorer.config import Settings
from explorer.errors import RunNotFound, require_extra
from explorer.ingest.limits import IngestLimits
from explorer.runs.apart import IngestProcesses, killed_message
from explorer.runs.records import combined_sha256
from explorer.store.runs import UNFINISHED, RunStore

if TYPE_CHECKING:  # the team extra's job queue: imported only by a queued server (make_ingester)
    from explorer.runs.jobs.queue import IngestQueue

log = logging.getLogger(__name__)


@dataclass
class Upload:
    folder: Path
    paths: list[Path] = field(default_factory=list)
    shas: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    total_bytes: int = 0
    relpaths: list[Path] = field(default_factory=list)

    def ingest_paths(self) -> list[Path]:
        """What to ingest: parts sent with a folder path are gathered back into that folder (one
        tree per top-level name, so member names keep the layout); plain files go as they are."""
        out: list[Path] = []
        trees: dict[str, Path] = {}
        for path, rel in zip(self.paths, self.relpaths, strict=True):
            if len(rel.parts) == 1:
                out.append(path)
                continue
            top = rel.parts[0]
            tree = trees.get(top)
            if tree is None:
                tree = trees[top] = self.folder / "trees" / top
                out.append(tree)
            target = tree.parent / rel
            if target.exists():  # the same path sent twice: keep the second copy as a loose file
                out.append(path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        return out

    @property
    def sha256(self) -> str:
        return combined_sha256(self.shas)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class Ingester(Protocol):
    """What the server asks of its ingester."""

    on_ready: Callable[[str], None] | None  # called with a run id once this process saw the run get ready

    def submit(self, run_id: str, upload: Upload) -> object:
        """Ingest an upload in the background; the upload's folder is removed when done."""

    def ingest_paths(self, run_id: str, paths: list[Path]) -> bool | None:
        """Ingest files that stay where they are (a watched folder): True when the run is ready, False when it
        failed, None when it was handed to others (it gets ready elsewhere)."""

    def held_runs(self) -> set[str] | None:
        """Runs whose ingest someone else still holds (a queue's jobs): not to be failed as interrupted; None
        when every ingest dies with this process (inline)."""

    def shutdown(self) -> None: ...


class InlineIngester:
    """Background ingests in this server: a thread pool whose threads each wait for one upload's ingest in a
    process of its own (explorer.runs.apart)."""

    def __init__(self, store: RunStore, workers: int, max_uncompressed_bytes: int,
                 limits: IngestLimits | None, processes: IngestProcesses) -> None:
        self.store = store
        self.max_bytes = max_uncompressed_bytes
        self.limits = limits
        self.processes = processes
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="ingest")
        # called with the run id once a run is ready, still on the worker thread (e.g. to warm caches
        # so the first timeline view does not pay for building the run's index)
        self.on_ready: Callable[[str], None] | None = None

    def submit(self, run_id: str, upload: Upload) -> Future[None]:
        return self._pool.submit(self._ingest, run_id, upload)

    def _ingest(self, run_id: str, upload: Upload) -> None:
        try:
            if not self.ingest_apart(run_id, upload.ingest_paths(), upload.folder):
                return
            log.info("run %s ingested", run_id)
            if self.on_ready is not None:
                self.on_ready(run_id)
        except Exception as exc:  # the run is marked failed with the message; the server keeps serving
            log.warning("ingest of run %s failed: %s", run_id, exc)
        finally:
            upload.discard()

    def ingest_apart(self, run_id: str, paths: list[Path], folder: Path | None = None) -> bool:
        """The ingest in its own process, waited for (on the caller's thread); whether the run is ready. A child
        that died without a word (killed: out of memory) left its run unfinished: it is failed here, with a
        message saying so. `folder`: the upload's, removed by the child (none: files that stay, a watched
        folder's)."""
        opened = self.store.catalog.opened_on  # the child opens this very catalog (SQLite: the data folder's own)
        exitcode = self.processes.run(run_id, paths, self.max_bytes, self.limits, opened if isinstance(opened, str) else "",
                                      discard=folder)
        try:
            status = self.store.catalog.get(run_id).status
        except RunNotFound:  # deleted meanwhile
            return False
        if status in UNFINISHED:
            self.store.catalog.update(run_id, status="failed", message=killed_message(exitcode))
            self.store.discard_scratch(run_id)
            log.warning("ingest process of run %s ended with %s", run_id, exitcode)
        return status == "ready"

    def ingest_paths(self, run_id: str, paths: list[Path]) -> bool:
        return self.ingest_apart(run_id, paths)

    def held_runs(self) -> None:
        return None  # nothing outlives this process's ingests

    def shutdown(self) -> None:
        self.processes.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)


class QueuedIngester:
    """InlineIngester's place with ingest_queue=postgres: an upload becomes one job on the queue (explorer.runs.jobs)
    and `trace-explorer worker` processes ingest it; this process parses nothing. `on_ready` is never called
    here (the run gets ready in a worker)."""

    def __init__(self, store: RunStore, queue: IngestQueue) -> None:
        self.store = store
        self.queue = queue
        self.on_ready: Callable[[str], None] | None = None

    def submit(self, run_id: str, upload: Upload) -> None:
        try:
            self.queue.enqueue(run_id, upload.folder, upload.ingest_paths())
        except Exception as exc:  # the run must not stay queued with no job: it fails, the upload goes
            log.warning("could not queue the ingest of run %s: %s", run_id, exc)
            self.store.catalog.update(run_id, status="failed", message=f"could not queue its ingest: {exc}")
            upload.discard()
            self.queue.shared.delete(run_id)
            raise

    def submit_paths(self, run_id: str, paths: list[Path]) -> None:
        """Queue the ingest of files that stay where they are (a watched log folder): copies of them (a capture
        folder whole), named as they are, go to the shared files as an upload would."""
        upload = Upload(Path(tempfile.mkdtemp(prefix=f"watch-{run_id}-", dir=self.store.tmp_dir)))
        try:
            for path in paths:
                target = upload.folder / path.name
                if path.is_dir():
                    shutil.copytree(path, target, symlinks=True)
                else:
                    shutil.copyfile(path, target)
                upload.paths.append(target)
                upload.relpaths.append(Path(path.name))
        except OSError as exc:
            self.store.catalog.update(run_id, status="failed", message=f"could not copy the watched files: {exc}")
            upload.discard()
            raise
        self.submit(run_id, upload)

    def ingest_paths(self, run_id: str, paths: list[Path]) -> None:
        self.submit_paths(run_id, paths)

    def held_runs(self) -> set[str]:
        return self.queue.held_runs()

    def shutdown(self) -> None:
        self.queue.app.close()


def make_ingester(settings: Settings, store: RunStore) -> Ingester:
    """Who ingests uploads: this process's threads, or (ingest_queue=postgres) the workers of the job queue in
    the catalog's database, whose schema must be there (`trace-explorer db upgrade`)."""
    if settings.ingest_queue == "inline":
        return InlineIngester(store, settings.ingest_workers, settings.max_uncompressed_bytes,
                              IngestLimits.from_settings(settings), IngestProcesses(settings))
    require_extra("procrastinate", "--ingest-queue postgres")
    from explorer.runs.jobs.queue import (
        IngestQueue,  # the team extra's libraries, loaded only by a queued server
    )

    queue = IngestQueue(settings, store)
    queue.app.open()
    try:
        queue.check_schema()
    except BaseException:
        queue.app.close()
        raise
    return QueuedIngester(store, queue)
