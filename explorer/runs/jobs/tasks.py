"""The bodies of the ingest jobs (explorer.runs.jobs.queue registers them), each guarded the same way: bad input
fails the run once, a transient error is retried, anything else is an ingest bug. The finish is the inline
ingest's own (explorer.runs.ingest.ingest_into); files move only through explorer.runs.jobs.shared."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from procrastinate import exceptions as queue_errors
from procrastinate.job_context import JobContext
from sqlalchemy.exc import OperationalError

from explorer.errors import CatalogUnavailable, ExplorerError, IngestBug, RunNotFound
from explorer.ingest.capture import find_process_folders
from explorer.ingest.detect import Format, detect_format
from explorer.ingest.limits import IngestLimits
from explorer.ingest.parts import Part, PartJob, parse_part, read_part
from explorer.ingest.sources import Inputs, collect_inputs
from explorer.runs.ingest import ingest_bug, ingest_into
from explorer.runs.jobs.fanout import Fanout

log = logging.getLogger(__name__)

# Errors of the machine, the network or the shared folder, not of the input: retried with backoff.
# CatalogUnavailable is the one ExplorerError among them: the catalog not answering says nothing of the input.
TRANSIENT: tuple[type[Exception], ...] = (OSError, CatalogUnavailable, OperationalError, psycopg.OperationalError,
                                         queue_errors.ConnectorException)
ORIGIN = "origin.txt"  # in a shared part tree: the folder it was written in (spilled args name files under it)


def fanout_members(inputs: Inputs) -> list[int]:
    """The members parsed by their own jobs, by index: the loose Chrome/Kineto files when there are two or
    more (those explorer.ingest.pipeline would hand to explorer.ingest.parallel); [] for a run ingested whole."""
    _, loose = find_process_folders(inputs.members)
    chrome = {id(m) for m in loose if detect_format(m.head()) is Format.CHROME and m.path is not None}
    chosen = [i for i, m in enumerate(inputs.members) if id(m) in chrome]
    return chosen if len(chosen) >= 2 else []


def describe(exc: BaseException) -> str:
    return exc.message if isinstance(exc, ExplorerError) else " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


class IngestJobs:
    def __init__(self, queue: Fanout, limits: IngestLimits) -> None:
        self.queue = queue
        self.store = queue.store
        self.shared = queue.shared
        self.limits = limits
        self.max_bytes = queue.settings.max_uncompressed_bytes
        self.attempts = queue.settings.queue_max_attempts

    # ---- the three jobs ----------------------------------------------------------------------------

    def ingest(self, context: JobContext, run_id: str, paths: list[str]) -> None:
        """A run's first job: read the upload; fan out a multi-file Chrome/Kineto run, ingest any other whole."""
        self._guard(context, run_id, "ingest", lambda: self._ingest(run_id, paths))

    def parse(self, context: JobContext, run_id: str, index: int, name: str, key: str, rel: str) -> None:
        """Parse one file of a fanned-out run into a part; the job that parses the last one queues the merge."""
        self._guard(context, run_id, f"parse of {name}", lambda: self._parse(run_id, index, name, key, rel))

    def merge(self, context: JobContext, run_id: str) -> None:
        """Merge the parts and finish the run as the inline ingest does."""
        self._guard(context, run_id, "merge", lambda: self._merge(run_id))

    # ---- bodies ------------------------------------------------------------------------------------

    def _ingest(self, run_id: str, paths: list[str]) -> None:
        folder = self.shared.get(f"{run_id}/upload")
        files = [folder / p for p in paths]
        self._report(run_id)(0.0, "reading files")
        inputs = collect_inputs(files, self.max_bytes, scratch_root=self.store.tmp_dir)
        try:
            chosen = fanout_members(inputs)
            if chosen:
                self._fan_out(run_id, folder, paths, inputs, chosen)
                return
        except BaseException:
            inputs.cleanup()
            raise
        self._discard_half_run(run_id)
        ingest_into(self.store, run_id, files, self.max_bytes, self._report(run_id), self.limits, inputs=inputs)
        self.shared.delete(run_id)

    def _fan_out(self, run_id: str, folder: Path, paths: list[str], inputs: Inputs, chosen: list[int]) -> None:
        """Queue one parse job per chosen member (decompressed members go to the shared files first)."""
        jobs: list[dict[str, Any]] = []
        scratch = inputs.scratch
        assert scratch is not None
        for i in chosen:
            path = inputs.members[i].path
            assert path is not None
            key, base = (f"{run_id}/upload", folder) if path.is_relative_to(folder) else (f"{run_id}/inputs", scratch)
            jobs.append({"run_id": run_id, "index": i, "name": inputs.members[i].name, "key": key,
                         "rel": path.relative_to(base).as_posix()})
        if any(job["key"] == f"{run_id}/inputs" for job in jobs):  # decompressed here: shared for the parse jobs
            self.shared.put(scratch, f"{run_id}/inputs")
        inputs.cleanup()
        self.queue.start_fanout(run_id, {"paths": paths, "members": {str(j["index"]): j["name"] for j in jobs}})
        self._report(run_id)(0.0, f"queued {len(jobs)} files to parse")  # before the parse jobs report
        for job in jobs:
            self.queue.defer_parse(**job)

    def _parse(self, run_id: str, index: int, name: str, key: str, rel: str) -> None:
        if self.queue.is_parsed(run_id, index):  # a duplicate, or this job's first attempt died after counting
            log.info("run %s: member %d is parsed already", run_id, index)
        else:
            source = self.shared.file(key, rel)
            work = Path(tempfile.mkdtemp(prefix=f"part-{run_id}-", dir=self.store.tmp_dir))
            try:
                (work / "spill").mkdir()
                parse_part(PartJob(name, work / "part", self.limits, name, source, scratch=work / "spill"))
                (work / ORIGIN).write_text(str(work))
                self.shared.put(work, f"{run_id}/parts/{index}")
            finally:
                shutil.rmtree(work, ignore_errors=True)
        done, total = self.queue.mark_parsed(run_id, index)
        self._report(run_id)(0.9 * done / total, f"parsed {done} of {total} files")
        if done == total:
            self.queue.defer_merge(run_id)

    def _merge(self, run_id: str) -> None:
        plan = self.queue.fanout_plan(run_id)
        if plan is None:
            log.info("run %s: nothing to merge (finished already)", run_id)
            return
        folder = self.shared.get(f"{run_id}/upload")
        members: dict[int, str] = {int(i): name for i, name in plan["members"].items()}

        def parts(inputs: Inputs) -> dict[int, Part]:
            names = [m.name for m in inputs.members]
            if any(i >= len(names) or names[i] != name for i, name in members.items()):
                raise IngestBug(f"run {run_id}: the upload's members changed between its jobs")
            return {i: self._read_part(run_id, i) for i in members}

        self._discard_half_run(run_id)
        ingest_into(self.store, run_id, [folder / p for p in plan["paths"]], self.max_bytes, self._report(run_id),
                    self.limits, parts=parts)
        self.queue.end_fanout(run_id)
        self.shared.delete(run_id)

    def _read_part(self, run_id: str, index: int) -> Part:
        """A parse job's part, its spilled args' paths moved to where its tree is now (read_part, not load_part:
        the tree stays until the run is saved, so a merge killed midway can run again)."""
        tree = self.shared.get(f"{run_id}/parts/{index}")
        part = read_part(tree / "part")
        part.relocate((tree / ORIGIN).read_text(), str(tree))
        return part

    # ---- status and failure ------------------------------------------------------------------------

    def _guard(self, context: JobContext, run_id: str, what: str, body: Callable[[], None]) -> None:
        attempt = context.job.attempts + 1
        log.info("%s took job %s (%s of run %s, attempt %d of %d)", context.worker_name, context.job.id, what,
                 run_id, attempt, self.attempts)
        try:
            status = self.store.get(run_id).status
            if status in ("ready", "failed"):  # a duplicate, or a retry of a job killed after the run's end
                log.info("run %s is %s: %s skipped", run_id, status, what)
                self.queue.end_fanout(run_id)
                self.shared.delete(run_id)
                return
            body()
        except RunNotFound:  # deleted meanwhile
            log.info("run %s was deleted: %s dropped", run_id, what)
            self.shared.delete(run_id)
        except TRANSIENT as exc:
            if attempt >= self.attempts:
                self.fail_run(run_id, f"{what} failed {attempt} times; the last time: {describe(exc)}")
            else:
                self._note(run_id, f"{what} failed ({describe(exc)}); retrying (attempt {attempt} of {self.attempts})")
            raise
        except ExplorerError as exc:  # bad input: fails the run once, never retried
            self.fail_run(run_id, exc.message)
            raise
        except Exception as exc:
            bug = ingest_bug(self.store, run_id, [Path(run_id)], exc)
            self.fail_run(run_id, bug.message)
            raise bug from exc
        finally:  # this machine's copies of the run's shared files (object storage): the next job fetches anew
            self.shared.forget_local(run_id)

    def fail_run(self, run_id: str, message: str) -> None:
        """The run failed with `message`; its counter row and shared files go."""
        log.warning("run %s failed: %s", run_id, message)
        try:
            self.store.catalog.update(run_id, status="failed", message=message)
            self.queue.end_fanout(run_id)
        except RunNotFound:
            pass
        self.shared.delete(run_id)

    def _note(self, run_id: str, message: str) -> None:
        try:
            self.store.catalog.update(run_id, message=message)
        except Exception:  # the catalog is what failed, perhaps: the retry says it again
            log.warning("could not note the retry of run %s", run_id, exc_info=True)

    def _report(self, run_id: str) -> Callable[[float, str], None]:
        def report(fraction: float, what: str) -> None:
            self.store.catalog.update(run_id, status="ingesting", progress=round(fraction, 3), message=what)

        return report

    def _discard_half_run(self, run_id: str) -> None:
        """A run folder of a run not ready is a killed attempt's (moved into place, catalog not yet told): the
        save replaces it (os.replace cannot replace a folder that is not empty). On object storage each attempt
        has a key of its own, and the sweep removes the ones the catalog never recorded."""
        if self.store.storage.attempts:  # object storage: a killed attempt is an unreferenced key, swept later
            return
        shutil.rmtree(self.store.runs_dir / run_id, ignore_errors=True)
