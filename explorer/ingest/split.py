"""Where an ingest's time goes: wall-clock ns per step (parse, sort, nesting, links, op table, write, hash).

Recorded in the run's meta (`ingest_split_ns`) so a benchmark (bench/ingest.py --split) can show the next
bottleneck; nothing reads it back to decide anything.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

SPLIT_KEY = "ingest_split_ns"  # the meta key of a run's split


class TimeSplit:
    """Named wall-clock totals in integer ns; a step timed twice adds up."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.add(name, time.perf_counter_ns() - start)

    def add(self, name: str, ns: int) -> None:
        self.ns[name] = self.ns.get(name, 0) + ns
