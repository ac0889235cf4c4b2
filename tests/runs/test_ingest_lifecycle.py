"""An interrupted CLI ingest never leaves a run `ingesting`: Ctrl-C and SIGTERM mark it failed at once,
kill -9 leaves a lease that lapses with its process; and a server started while a CLI ingest runs on the
same data folder leaves that live run (and its scratch files) alone. Each acts on an ingest held stopped
mid-way (paused_while_ingesting): on a loaded machine, a signal sent after the catalog said `ingesting` could
otherwise reach a process that had finished in between."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from api.app import create_app
from explorer.config import Settings
from explorer.store.catalog.catalog import Catalog
from explorer.store.runs import RunStore
from tests.helpers import catalog_hook

EVENTS = 1_200_000  # a few seconds of ingest on this machine: long enough to interrupt


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.json"
    with path.open("w") as f:
        f.write('{"traceEvents": [')
        f.write(",".join(f'{{"ph":"X","cat":"cpu_op","name":"op{i % 50}","pid":1,"tid":{i % 4},"ts":{i * 3},"dur":2}}'
                         for i in range(EVENTS)))
        f.write("]}")
    return path


def start_ingest(trace: Path, data: Path) -> subprocess.Popen[str]:
    """The console script, as a terminal starts it: with SIGINT's default action, whatever this process was
    given (a shell's background job, e.g. `make test &` from a script, runs with SIGINT ignored, POSIX, and a
    child inherits that through exec: Python then installs no KeyboardInterrupt, and Ctrl-C is not tested)."""
    exe = Path(sys.executable).parent / "trace-explorer"
    return subprocess.Popen([str(exe), "ingest", str(trace), "--data-dir", str(data)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_interrupt)


def _default_interrupt() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_ingesting(data: Path, proc: subprocess.Popen[str]) -> str:
    url = catalog_hook.catalog_of(data)  # the folder's schema with the PostgreSQL switch on, else the file
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if url or (data / "catalog.sqlite").exists():
            catalog = Catalog(url or data / "catalog.sqlite")
            try:
                runs = [r for r in catalog.list()[0] if r.status == "ingesting"]
                if runs and catalog.lease(runs[0].id):
                    return runs[0].id
            finally:
                catalog.close()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the ingest never started")


def status_of(data: Path, run_id: str) -> str:
    url = catalog_hook.catalog_of(data)
    catalog = Catalog(url or data / "catalog.sqlite")
    try:
        return catalog.get(run_id).status
    finally:
        catalog.close()


@contextmanager
def paused_while_ingesting(trace: Path, data: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A CLI ingest stopped (SIGSTOP) while its run is `ingesting`, continued (SIGCONT) after the body: what
    the body does (a signal sent, a server started) happens during the ingest however loaded the machine is.
    An ingest that ended between the catalog's `ingesting` and the stop (a busy machine) is started again."""
    for _ in range(5):
        shutil.rmtree(data, ignore_errors=True)
        proc = start_ingest(trace, data)
        run_id = wait_ingesting(data, proc)
        os.kill(proc.pid, signal.SIGSTOP)
        if proc.poll() is None and status_of(data, run_id) == "ingesting":
            try:
                yield proc, run_id
            finally:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGCONT)
            return
        os.kill(proc.pid, signal.SIGCONT)
        proc.communicate(timeout=120)
    raise AssertionError("every ingest ended before it could be stopped")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_marks_the_run_failed(big_trace: Path, tmp_path: Path, sig: signal.Signals) -> None:
    data = tmp_path / "data"
    with paused_while_ingesting(big_trace, data) as (proc, run_id):
        proc.send_signal(sig)  # pending while stopped: handled mid-ingest once continued
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    rec = RunStore(data).catalog.get(run_id)
    assert rec.status == "failed" and "interrupted" in rec.message
    assert RunStore(data).catalog.lease(run_id) is None


@pytest.mark.slow
def test_kill_9_lapses_and_the_next_process_marks_it_failed(big_trace: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with paused_while_ingesting(big_trace, data) as (proc, run_id):
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    store = RunStore(data)
    assert store.catalog.get(run_id).status == "ingesting"  # nobody could say otherwise yet
    assert store.recover() == 1
    rec = store.catalog.get(run_id)
    assert rec.status == "failed" and f"pid {proc.pid}" in rec.message
    assert list(store.tmp_dir.iterdir()) == []


@pytest.mark.slow
def test_a_server_starting_during_a_cli_ingest_leaves_it_alone(big_trace: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with paused_while_ingesting(big_trace, data) as (proc, run_id):
        scratch_before = sorted(p.name for p in (data / "tmp").iterdir())
        create_app(Settings(data_dir=data))  # what `serve` does first: recover the data folder
        store = RunStore(data)
        assert store.catalog.get(run_id).status == "ingesting"
        assert sorted(p.name for p in store.tmp_dir.iterdir()) == scratch_before
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip().splitlines()[-1] == run_id
    rec = store.catalog.get(run_id)
    assert rec.status == "ready" and rec.summary.slices == EVENTS
    assert store.catalog.lease(run_id) is None


@pytest.mark.parametrize("every_s", [0.0, 3600.0])
def test_progress_reaches_the_catalog_once_per_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        every_s: float) -> None:
    """The caller hears every progress report; the catalog, where each is a committed transaction, hears the
    first (the run is `ingesting`) and then one per PROGRESS_EVERY_S; the run ends ready either way."""
    from explorer.runs import ingest as service

    monkeypatch.setattr(service, "PROGRESS_EVERY_S", every_s)
    store = RunStore(tmp_path / "data")
    paths = []
    for rank in range(3):
        paths.append(tmp_path / f"rank{rank}.json")
        paths[-1].write_text('{"traceEvents": [' + ",".join(
            f'{{"ph":"X","cat":"cpu_op","name":"op","pid":{rank},"tid":1,"ts":{i * 3},"dur":2}}'
            for i in range(100)) + "]}")
    heard: list[tuple[float, str]] = []
    seen: list[dict[str, object]] = []
    update = store.catalog.update

    def spy(run_id: str, **fields: object) -> None:
        if fields.get("status") == "ingesting":
            seen.append(fields)
        update(run_id, **fields)

    monkeypatch.setattr(store.catalog, "update", spy)
    rec = service.ingest_paths(store, paths, progress=lambda f, what: heard.append((f, what)))
    assert store.catalog.get(rec.id).status == "ready"
    assert [w for _, w in heard] == ["reading files", "parsed rank0.json", "parsed rank1.json",
                                     "parsed rank2.json", "building tables", "writing tables"]
    reached = [(f["progress"], f["message"]) for f in seen]
    assert reached == ([(round(f, 3), w) for f, w in heard] if every_s == 0 else [(0.0, "reading files")])
