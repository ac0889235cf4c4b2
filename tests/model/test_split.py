"""The ingest's time split counts CPU per step as the kernel does: a step that computes has CPU about its wall
time, one that waits has almost none, and the child process a step waits for (the parse's check) counts."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from explorer.model.split import TimeSplit


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_computing_step_has_cpu_a_waiting_step_has_none() -> None:
    split = TimeSplit()
    with split.step("compute"):
        spin(0.3)
    with split.step("wait"):
        time.sleep(0.3)
    assert split.ns["compute"] >= 300_000_000 and split.ns["wait"] >= 300_000_000
    assert split.cpu["compute"] >= 0.6 * split.ns["compute"]  # a shared box may take the core away a while
    assert split.cpu["wait"] < 0.1 * split.ns["wait"]


def test_another_thread_and_a_waited_child_count() -> None:
    """The step's own thread only waits; the CPU is another thread's, then a child process's."""
    split = TimeSplit()
    with split.step("thread"):
        worker = threading.Thread(target=spin, args=(0.3,))
        worker.start()
        worker.join()
    code = "import time\nend = time.perf_counter() + 0.3\nwhile time.perf_counter() < end: pass"
    with split.step("child"):
        subprocess.run([sys.executable, "-c", code], check=True)
    assert split.cpu["thread"] >= 0.6 * 0.3e9
    assert split.cpu["child"] >= 0.6 * 0.3e9


def test_steps_add_up() -> None:
    split = TimeSplit()
    split.add("parse", 5, 3)
    split.add("parse", 7, 4)
    split.add("feed", 2)
    assert split.ns == {"parse": 12, "feed": 2}
    assert split.cpu == {"parse": 7, "feed": 0}
