"""SQL queries in worker processes whose memory the OS bounds (RLIMIT_AS at the warm size plus
WORKER_HEADROOM_MB), since DuckDB's memory_limit does not cover every allocation nor its interrupt stop
every function; a query past its limit by KILL_GRACE_S is killed. Nothing here knows what a query reads.
See docs/security.md, "SQL"."""

from __future__ import annotations

import logging
import multiprocessing
import resource
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from explorer.errors import QueryRejected

log = logging.getLogger(__name__)

WORKER_HEADROOM_MB = 2048  # address space a query may add to a warm worker (DuckDB's own limit is half of it)
KILL_GRACE_S = 1.0  # past the time limit (the worker's own interrupt comes first), the worker is killed
Job = Callable[[Any], Any]


def vm_size() -> int:
    """This process's mapped address space in bytes (0 where /proc does not say)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _serve(conn: Connection, headroom: int, warm: Job, run: Job) -> None:
    """The worker: warm up (imports, a first query), bound the address space, then answer jobs until the pipe
    closes. Each answer is (ok, value or message, retire)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle; it ends its workers
    warm(None)
    base = vm_size()
    if base:
        resource.setrlimit(resource.RLIMIT_AS, (base + headroom, base + headroom))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[bool, Any] = (True, run(job))
        except QueryRejected as exc:
            answer = (False, exc.message)
        except MemoryError:
            answer = (False, f"query needs more memory than a query may use ({headroom // 2**20} MiB)")
        retire = bool(base) and vm_size() > base + headroom // 2
        try:
            conn.send((*answer, retire))
        except MemoryError:  # the answer itself did not fit: say so, in fewer bytes
            conn.send((False, "the query's result needs more memory than a query may use", True))
        if retire:
            return


class _Worker:
    def __init__(self, warm: Job, run: Job, headroom: int) -> None:
        context = multiprocessing.get_context("spawn")  # a server has threads: never fork it
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, headroom, warm, run), name="sql-worker",
                                       daemon=True)
        self.process.start()
        child.close()

    def ask(self, job: Any, wait_s: float) -> tuple[bool, Any, bool] | None:
        """The worker's answer, or None when it gave none within wait_s (it is then killed) or died."""
        try:
            self.conn.send(job)
            if self.conn.poll(wait_s):
                answer: tuple[bool, Any, bool] = self.conn.recv()
                return answer
        except (EOFError, OSError):
            pass
        self.stop()
        return None

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)
        self.conn.close()


class SqlWorkers:
    """Workers for `run(job)`, one per query at a time; the caller bounds how many queries run at once."""

    def __init__(self, warm: Job, run: Job, headroom_mb: int = WORKER_HEADROOM_MB) -> None:
        self.warm = warm
        self.run = run
        self.headroom = headroom_mb * 2**20
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def query(self, job: Any, timeout_s: float) -> Any:
        """The job's result from a worker; QueryRejected with the worker's message, at the time limit (the
        worker killed), or when the worker died (out of memory outside DuckDB's reach)."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None or not worker.process.is_alive():
            worker = _Worker(self.warm, self.run, self.headroom)
        answer = worker.ask(job, timeout_s + KILL_GRACE_S)
        if answer is None:
            code = worker.process.exitcode
            log.warning("SQL worker %s stopped (exit %s) running a query", worker.process.pid, code)
            if code == -signal.SIGKILL:
                raise QueryRejected(f"query stopped at the time limit of {timeout_s:g} s")
            raise QueryRejected(f"query stopped: it needed more memory than a query may use "
                                f"({self.headroom // 2**20} MiB)")
        ok, value, retire = answer
        if retire:
            worker.stop()
        else:
            with self._lock:
                self._idle.append(worker)
        if not ok:
            raise QueryRejected(value)
        return value

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
