"""The files (ranks) of one multi-file run parsed at the same time, in a pool of worker processes, each
writing its part (explorer.ingest.parts) for the merge in the ingest's own process.

Workers start from a forkserver that has imported the parsers, never by forking the ingest's process
(DuckDB, a server's threads and their locks may be alive there). The pool lives for one ingest: at most
`processes` workers, never more than the files. Like every spawn/forkserver pool, a worker imports the
program's main module: a script that ingests must keep its work under `if __name__ == "__main__":`; where a
worker dies (that, or the kernel's OOM killer), the files are parsed in the ingest's own process instead. Which runs take this path is decided here (use_parallel);
what a part holds and how it merges, in parts.py.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from explorer.ingest.parts import PartJob, parse_part

log = logging.getLogger(__name__)

# Below this (all the files together) a worker's start and the parts' round trip through the disk cost
# more than parsing in one process: measured with bench/ranks_ingest.py on the 2-core dev box.
PARALLEL_MIN_BYTES = 16 * 2**20
START_METHOD = "forkserver"
PRELOAD = ["explorer.ingest.parts"]  # imported once by the forkserver: each worker starts with the parsers


def use_parallel(sizes: list[int], processes: int, forced: bool | None) -> bool:
    """Parse these files (their sizes) in worker processes? `forced` True/False decides; None: when there
    are two or more, more than one process is allowed, and they are big enough to pay for the workers."""
    if len(sizes) < 2:
        return False
    if forced is not None:
        return forced
    return processes > 1 and sum(sizes) >= PARALLEL_MIN_BYTES


def parse_parts(jobs: list[PartJob], processes: int,
                done: Callable[[PartJob], None] | None = None) -> list[Path] | None:
    """Run every job in the pool; their part folders, in job order, or None when a worker died (the caller
    parses in its own process then). `done` is called (in this process) as each job completes. The first
    job to raise cancels those not started and is raised here."""
    context = multiprocessing.get_context(START_METHOD)
    context.set_forkserver_preload(PRELOAD)
    folders: list[Path | None] = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=max(1, min(processes, len(jobs))), mp_context=context) as pool:
        futures = {pool.submit(parse_part, job): i for i, job in enumerate(jobs)}
        try:
            for future in as_completed(futures):
                i = futures[future]
                folders[i] = future.result()
                if done is not None:
                    done(jobs[i])
        except BrokenProcessPool as exc:
            log.warning("a parse worker died (%s): the %d files are parsed in this process", exc, len(jobs))
            return None
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return [folder for folder in folders if folder is not None]
