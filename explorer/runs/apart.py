"""A server's ingest in a process of its own, started from a forkserver: the very ingest the CLI runs, whose
memory, GIL-holding Python steps and crashes (the OOM killer) are that process's, not the server's. Why:
docs/reliability.md, "Uploads"."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import threading
from pathlib import Path

from explorer.config import Settings
from explorer.errors import ExplorerError
from explorer.ingest.limits import IngestLimits
from explorer.native.memory import as_ingest_process, ingest_environment

log = logging.getLogger(__name__)

PRELOAD = ["explorer.native.forkserver", "explorer.runs.ingest"]  # the first: see its docstring
JOIN_S = 1.0  # how often a waiting thread looks whether it was asked to stop


def _child(settings: Settings, run_id: str, paths: list[Path], max_bytes: int, limits: IngestLimits | None,
           environ: dict[str, str], discard: Path | None) -> None:
    """The ingest, in the child, with the server's environment as it was when the child was asked for (a
    forkserver's children get the forkserver's own, from when it started: storage credentials set since
    would be missing). SIGTERM unwinds like Ctrl-C, so run_ingest marks the run failed as interrupted."""
    from explorer.runs.ingest import run_ingest
    from explorer.store.runs import RunStore

    os.environ.clear()
    os.environ.update(environ)
    _die_with_parent()
    as_ingest_process()

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    store = RunStore.from_settings(settings)
    try:
        run_ingest(store, run_id, paths, keep_failed=True, max_bytes=max_bytes, limits=limits)
    except ExplorerError as exc:  # recorded in the catalog by run_ingest; the parent reads it there
        log.info("ingest of run %s failed: %s", run_id, exc.message)
    except OSError:  # likewise recorded, and logged with its traceback by run_ingest
        pass
    finally:
        store.catalog.close()
        if discard is not None:  # the upload's folder, gone as soon as its run is ready or failed
            shutil.rmtree(discard, ignore_errors=True)


def _die_with_parent() -> None:
    """SIGTERM to this child when the server that asked for it is gone (multiprocessing's parent sentinel: a
    pipe the server holds): a server killed outright (SIGKILL) leaves no ingest running on, and its run is
    marked failed as interrupted, as the run of a killed CLI ingest is."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="ingest-parent-watch", daemon=True).start()


class IngestProcesses:
    """Starts one child per ingest and waits for it; `stop()` asks the running ones to stop (SIGTERM)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        ingest_environment()  # the forkserver, started with the first child, and its children inherit it
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(PRELOAD)
        self._running: set[multiprocessing.process.BaseProcess] = set()
        self._stopping = False

    def run(self, run_id: str, paths: list[Path], max_bytes: int, limits: IngestLimits | None,
            catalog_url: str, discard: Path | None = None) -> int:
        """Ingest in a child and wait for it; the child's exit code (negative: the signal that killed it).
        `catalog_url`: the catalog the server has open (its settings' URL, "" for the data folder's SQLite);
        `discard`: a folder the child removes once the run is ready or failed (the upload's)."""
        settings = self.settings.model_copy(update={"catalog_url": catalog_url})
        child = self._context.Process(target=_child, args=(settings, run_id, paths, max_bytes, limits, dict(os.environ),
                                                           discard),
                                      name=f"ingest-{run_id}", daemon=False)
        child.start()
        self._running.add(child)
        try:
            while child.exitcode is None:
                child.join(JOIN_S)
                if self._stopping and child.is_alive():
                    child.terminate()
                    child.join()
        finally:
            self._running.discard(child)
        return int(child.exitcode or 0)

    def stop(self) -> None:
        """Ask every running child to stop: each marks its run failed ("interrupted") on its way out."""
        self._stopping = True
        for child in list(self._running):
            if child.is_alive():
                child.terminate()


def killed_message(exitcode: int) -> str:
    """The run's message when its ingest process died without saying why (it had no chance to)."""
    if exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.Signals._value2member_map_ else str(-exitcode)
        why = " (most likely out of memory)" if -exitcode == signal.SIGKILL else ""
        return f"the ingest process was killed by {name}{why}; ingest it again, or with more memory"
    return f"the ingest process ended with exit status {exitcode}; this is a bug: see the server's log"
