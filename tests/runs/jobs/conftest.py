"""One queue deployment per test module: a fresh PostgreSQL database (dropped afterwards) holding the catalog and
the job queue (`trace-explorer db upgrade`), one data folder shared by the web app (a TestClient in this
process, ingest_queue=postgres) and by real `trace-explorer worker` subprocesses, with short timeouts."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from psycopg.rows import dict_row

from api.app import create_app
from api.cli import main
from explorer.config import Settings
from tests.helpers import catalog_hook
from tests.helpers.catalog_backends import admin

ROOT = Path(__file__).resolve().parents[3]
PG = "postgresql://postgres@127.0.0.1:5432"
# the worker processes' settings: a dead worker is noticed after 3 s, a retry waits 1 s, three attempts at most
WORKER_ENV = {"EXPLORER_QUEUE_STALLED_S": "3", "EXPLORER_QUEUE_RETRY_WAIT_S": "1", "EXPLORER_QUEUE_MAX_ATTEMPTS": "3"}


@dataclass
class Deployment:
    url: str
    data: Path
    client: TestClient
    logs: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def sql(self, query: str, *args: Any) -> list[dict[str, Any]]:
        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as conn:
            cursor = conn.execute(query, args)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def upload(self, files: list[Path], name: str = "queued") -> str:
        parts = [("files", (f.name, f.read_bytes())) for f in files]
        r = self.client.post("/api/runs", files=parts, data={"name": name})
        assert r.status_code == 202, r.text
        assert r.json()["status"] == "queued"
        return str(r.json()["id"])

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self.client.get(f"/api/runs/{run_id}").json())

    def wait_run(self, run_id: str, until: Callable[[dict[str, Any]], bool] | None = None,
                 timeout: float = 60) -> dict[str, Any]:
        """The run once `until` holds (default: ready or failed)."""
        done = until or (lambda run: run["status"] in ("ready", "failed"))
        deadline = time.monotonic() + timeout
        while not done(run := self.run(run_id)):
            assert time.monotonic() < deadline, f"run {run_id} still {run}; worker logs:\n{self.tail()}"
            time.sleep(0.1)
        return run

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        return self.sql("SELECT id, task_name, status::text AS status, attempts FROM procrastinate_jobs "
                        "WHERE args->>'run_id' = %s ORDER BY id", run_id)

    @contextmanager
    def workers(self, n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
        """`n` `trace-explorer worker` processes, each registered with the queue before this yields; stopped
        (SIGTERM) at the end."""
        procs = [self.start_worker() for _ in range(n)]
        try:  # procrastinate logs this once the worker is registered and listening
            self.wait_for(lambda: all("Starting worker on queues" in p.log.read_text() for p in procs),  # type: ignore[attr-defined]
                          "the workers to start")
            yield procs
        finally:
            for proc in procs:
                stop(proc)

    def start_worker(self) -> subprocess.Popen[bytes]:
        log = self.logs / f"worker-{len(self.started)}.log"
        cmd = [sys.executable, "-c", "from api.cli import main; main()", "worker", "--catalog-url", self.url,
               "--data-dir", str(self.data)]
        hook = [os.environ[catalog_hook.HOOK]] if os.environ.get(catalog_hook.HOOK) else []  # the PG switch's
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *hook]), "PYTHONUNBUFFERED": "1", **WORKER_ENV}
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        proc.log = log  # type: ignore[attr-defined]
        self.started.append(proc)
        return proc

    def wait_for(self, check: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}; worker logs:\n{self.tail()}"
            time.sleep(0.1)

    def tail(self) -> str:
        return "\n".join(f"--- {p.log}\n" + p.log.read_text()[-3000:] for p in self.started)  # type: ignore[attr-defined]

    def scratch(self) -> list[str]:
        """What is left in the data folder's tmp/ and in its shared queue files (explorer.runs.jobs.shared; the
        folders themselves are allowed to stay)."""
        keep = {self.data / "tmp" / "queue-copies", self.data / "queue"}
        return sorted(str(p.relative_to(self.data)) for folder in ("tmp", "queue") if (self.data / folder).is_dir()
                      for p in (self.data / folder).rglob("*") if p not in keep)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def queue_settings(url: str, data: Path) -> Settings:
    return Settings(data_dir=data, catalog_url=url, ingest_queue="postgres")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    name = "q_" + secrets.token_hex(6)
    with admin(f"{PG}/postgres") as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{PG}/{name}"
    folder = tmp_path_factory.mktemp("queue")
    try:
        upgraded = CliRunner().invoke(main, ["db", "upgrade", "--catalog-url", url, "--data-dir", str(folder / "data")])
        assert upgraded.exit_code == 0, upgraded.output
        assert "job queue schema applied" in upgraded.output
        (folder / "logs").mkdir()
        app = create_app(queue_settings(url, folder / "data"))
        try:
            with TestClient(app) as client:
                deployment = Deployment(url, folder / "data", client, folder / "logs")
                try:
                    yield deployment
                finally:
                    for proc in deployment.started:
                        stop(proc)
        finally:
            app.state.explorer.store.catalog.close()
    finally:
        with admin(f"{PG}/postgres") as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
