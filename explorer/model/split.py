"""Where an ingest's time goes: wall-clock and CPU ns per step, recorded in the run's meta (`ingest_split_ns`,
`ingest_cpu_ns`) for a benchmark (bench/ingest.py --split); nothing reads it back to decide anything. The
CPU figures come from getrusage's float seconds: a diagnostic, not a trace time."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SPLIT_KEY = "ingest_split_ns"  # the meta key of a run's split
CPU_KEY = "ingest_cpu_ns"  # the meta key of its CPU time per step


def _cpu_ns() -> int:
    """CPU time so far: this process's threads, and its children that were waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time_ns() + round((children.ru_utime + children.ru_stime) * 1e6) * 1000


class TimeSplit:
    """Named wall-clock and CPU totals in integer ns; a step timed twice adds up. `after_step`, when given, is
    called as each step ends (the ingest gives its freed memory back there: explorer.native.memory.release)."""

    def __init__(self, after_step: Callable[[], None] | None = None) -> None:
        self.ns: dict[str, int] = {}
        self.cpu: dict[str, int] = {}
        self.after_step = after_step

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        start, start_cpu = time.perf_counter_ns(), _cpu_ns()
        try:
            yield
        finally:
            self.add(name, time.perf_counter_ns() - start, _cpu_ns() - start_cpu)
            if self.after_step is not None:
                self.after_step()

    def add(self, name: str, ns: int, cpu: int = 0) -> None:
        self.ns[name] = self.ns.get(name, 0) + ns
        self.cpu[name] = self.cpu.get(name, 0) + cpu
