"""The ingest's time split counts CPU per step as the kernel does: a step that computes has at least the CPU its
thread used, one that waits has almost none, and another thread's CPU and a waited child process's count. The
CPU each piece of work used is read by the work itself (a shared box or the other test worker may slow it)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from explorer.model.split import TimeSplit

CHILD = ("import time\nx = 0\nfor i in range(3_000_000): x += i\n"
         "print(time.process_time_ns())")


def work() -> int:
    """A fixed amount of computing; returns the CPU ns this thread spent on it."""
    start = time.thread_time_ns()
    x = 0
    for i in range(3_000_000):
        x += i
    return time.thread_time_ns() - start


def test_a_computing_step_has_its_cpu_a_waiting_step_has_none() -> None:
    split = TimeSplit()
    with split.step("compute"):
        used = work()
    with split.step("wait"):
        time.sleep(0.5)
    assert used > 10_000_000
    assert split.cpu["compute"] >= used
    assert split.ns["wait"] >= 500_000_000
    assert split.cpu["wait"] < 0.1 * split.ns["wait"]


def test_another_thread_and_a_waited_child_count() -> None:
    """The step's own thread only waits; the CPU is another thread's, then a child process's."""
    split = TimeSplit()
    used: list[int] = []
    with split.step("thread"):
        worker = threading.Thread(target=lambda: used.append(work()))
        worker.start()
        worker.join()
    with split.step("child"):
        child_cpu = int(subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True,
                                       text=True).stdout)
    assert used[0] > 10_000_000 and child_cpu > 10_000_000
    assert split.cpu["thread"] >= used[0]
    assert split.cpu["child"] >= child_cpu - 1_000_000  # the kernel's count is in µs


def test_steps_add_up() -> None:
    split = TimeSplit()
    split.add("parse", 5, 3)
    split.add("parse", 7, 4)
    split.add("feed", 2)
    assert split.ns == {"parse": 12, "feed": 2}
    assert split.cpu == {"parse": 7, "feed": 0}
