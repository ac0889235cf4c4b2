"""The files (ranks) of one multi-file run parsed at the same time by the ingest's thread and `processes - 1`
other parsers (threads by default, or forkserver worker processes), parts coming back in job order for the
merge. Why threads, and the workers' rules: docs/architecture.md, "ingest/parallel.py"."""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.limits import IngestLimits
from explorer.ingest.parts import Part, PartJob, load_part, parse_here, parse_part
from explorer.ingest.sources import Member
from explorer.native.memory import ingest_environment

log = logging.getLogger(__name__)

# Below this (all the files together) this process has parsed every file before a worker is up: the first
# worker of a process costs the forkserver's imports, ~1.4 CPU s (~1.5 s of wall on a quiet 2-core box, in
# which this process parses ~80 MB at its ~55 MB/s), for nothing. Threads start at once; they keep the same
# bound, as runs below it were not measured with them (small files are msgspec's, in Python, under the GIL).
PARALLEL_MIN_BYTES = 64 * 2**20
START_METHOD = "forkserver"
# imported once by the forkserver (the first: see its docstring): each worker starts with the parsers
PRELOAD = ["explorer.native.forkserver", "explorer.ingest.parts"]


MIN_PROCESS_MB = 64  # Settings.ingest_memory_mb's own minimum: DuckDB ran out of memory at 40


def use_parallel(sizes: list[int], processes: int, forced: bool | None) -> bool:
    """Parse these files (their sizes) in worker processes? `forced` True/False decides; None: when there
    are two or more, more than one process is allowed, and they are big enough to pay for the parts."""
    if len(sizes) < 2:
        return False
    if forced is not None:
        return forced
    return processes > 1 and sum(sizes) >= PARALLEL_MIN_BYTES


def per_process_limits(limits: IngestLimits) -> IngestLimits:
    """The run's memory budget split between the processes parsing at once (the workers and the ingest's
    own), so the files of one run together keep to ingest_memory_mb; never under the 64 MB DuckDB needs. The
    cores are split the same way: each process's DuckDB reader gets its share of them, not all (measured on the
    2-core box, 8 files of 50 MB: the parallel parse took 10.4-11.8 s with one DuckDB thread per process
    against 15.1-17.3 s with two, four threads fighting over two cores)."""
    processes = max(1, limits.processes)
    return replace(limits, memory_mb=max(MIN_PROCESS_MB, limits.memory_mb // processes),
                   parse_threads=max(1, (os.cpu_count() or 1) // processes))


@contextmanager
def parsed_apart(members: list[Member], limits: IngestLimits, scratch: Path | None,
                 progress: Callable[[float, str], None] | None, forced: bool | None) -> Iterator[dict[int, Part]]:
    """The Chrome/Kineto members of a multi-file run parsed beside this process when use_parallel says so:
    member id -> its part; {} when they are to be parsed in process (or a worker died). The workers' part
    folders sit in one folder (in `scratch`), removed at the end."""
    if not use_parallel([m.size for m in members], limits.processes, forced):
        yield {}
        return
    root = Path(tempfile.mkdtemp(prefix="parts-", dir=scratch))
    try:
        # each file is its own instance, as the in-process parse names the files of a multi-file run
        each = per_process_limits(limits)
        jobs = [PartJob(m.name, root / str(i), each, m.name, m.path, m.data if m.path is None else None, scratch,
                        chrome_fast.SPILL_MIN_BYTES) for i, m in enumerate(members)]
        total, done = sum(m.size for m in members) or 1, [0]

        def report(job: PartJob) -> None:
            done[0] += members[jobs.index(job)].size
            if progress:
                progress(0.9 * done[0] / total, f"parsed {job.name}")

        parts = parse_parts(jobs, limits.processes, report, threads=limits.parse_in == "threads")
        yield {id(m): p for m, p in zip(members, parts, strict=True)} if parts is not None else {}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def parse_parts(jobs: list[PartJob], processes: int, done: Callable[[PartJob], None] | None = None,
                threads: bool = False) -> list[Part] | None:
    """Every job's part, in job order, or None when a worker died (the caller parses in its own process
    then). `done` is called in this process as each job completes. The first job to raise stops the others
    from being taken and is raised here. `threads`: the other `processes - 1` parsers are threads of this
    process (parse_here), not worker processes (see the module's docstring)."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # a worker starting up, importing a main module that ingests at its top level: fail its start (the ingest's
        # own process then parses), never run that ingest here, where it would print and write as the script
        raise RuntimeError("a parse worker imported a main module that ingests at its top level; guard the script "
                           "with `if __name__ == '__main__':`")
    share = _Share(jobs)
    workers = max(1, min(processes - 1, len(jobs) - 1))
    pool: ProcessPoolExecutor | None = None
    if threads:
        feeders = [threading.Thread(target=share.feed_here, daemon=True, name=f"parse-{k}") for k in range(workers)]
    else:
        ingest_environment()  # a forkserver started here, and its workers, inherit it
        context = multiprocessing.get_context(START_METHOD)
        context.set_forkserver_preload(PRELOAD)
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
        feeders = [threading.Thread(target=share.feed, args=(pool,), daemon=True) for _ in range(workers)]
    try:
        for feeder in feeders:
            feeder.start()
        while (i := share.take(from_end=True)) is not None:
            share.finished(i, parse_here(jobs[i]))
            share.report(done)
        while share.wait_workers(timeout=0.5):
            share.report(done)
        share.report(done)
    finally:
        share.stop()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)  # a worker still starting is not waited for
    parts = [part for part in share.parts if part is not None]
    if len(parts) == len(jobs):  # every job done: a worker that died after (it took none) changes nothing
        return parts
    if isinstance(share.error, BrokenProcessPool):
        log.warning("a parse worker died (%s): the %d files are parsed in this process", share.error, len(jobs))
        return None
    raise share.error or RuntimeError("parse jobs left unfinished")


class _Share:
    """The jobs not yet taken (workers take from the start, the ingest's process from the end), the parts
    finished, and the first error. Feeder threads hand one job at a time to the pool and wait for it."""

    def __init__(self, jobs: list[PartJob]) -> None:
        self.jobs = jobs
        self.parts: list[Part | None] = [None] * len(jobs)
        self.error: BaseException | None = None
        self._lo, self._hi = 0, len(jobs)
        self._lock = threading.Condition()
        self._busy = 0  # jobs the workers hold
        self._done: queue.SimpleQueue[int] = queue.SimpleQueue()

    def take(self, from_end: bool) -> int | None:
        with self._lock:
            if self.error is not None or self._lo >= self._hi:
                return None
            if from_end:
                self._hi -= 1
                return self._hi
            self._lo += 1
            self._busy += 1
            return self._lo - 1

    def wait_workers(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) until the workers hold no job; True while they still do."""
        with self._lock:
            return not self._lock.wait_for(lambda: self._busy == 0, timeout)

    def stop(self) -> None:
        with self._lock:
            self._lo = self._hi

    def finished(self, i: int, part: Part) -> None:
        self.parts[i] = part
        self._done.put(i)

    def feed(self, pool: ProcessPoolExecutor) -> None:
        """One worker's loop: wait until it is up (a job taken earlier would wait with it), then take jobs
        from the start until none is left."""
        try:
            pool.submit(int).result()
        except BaseException as exc:
            self._fail(exc)
            return
        self._take_all(lambda job: load_part(pool.submit(parse_part, job).result()))

    def feed_here(self) -> None:
        """A parse thread's loop: take jobs from the start and parse them in this process."""
        self._take_all(parse_here)

    def _take_all(self, parse: Callable[[PartJob], Part]) -> None:
        while (i := self.take(from_end=False)) is not None:
            try:
                part = parse(self.jobs[i])
            except BaseException as exc:  # raised (or, a dead worker, handled) by parse_parts
                self._fail(exc)
                return
            self.finished(i, part)
            with self._lock:
                self._busy -= 1
                self._lock.notify_all()

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            self.error = self.error or exc
            self._busy = 0
            self._lo = self._hi
            self._lock.notify_all()

    def report(self, done: Callable[[PartJob], None] | None) -> None:
        """Tell `done` (in the calling thread) about every job finished since the last call."""
        while not self._done.empty():
            i = self._done.get()
            if done is not None:
                done(self.jobs[i])
