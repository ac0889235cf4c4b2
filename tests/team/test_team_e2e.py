"""The team server end to end, every part a real process: PostgreSQL (catalog and job queue), an S3 API server
(moto's standalone mode) holding the runs, two `trace-explorer serve` replicas on their own ports and data
folders, two `trace-explorer worker` processes. An 8-file run uploaded to replica A is parsed by both workers;
replica B, which never saw it, serves the same timeline window, op table and share link; a worker killed with
SIGKILL in the middle of a job costs nothing but time; afterwards neither the catalog, the queue nor the bucket
holds anything that belongs to no run."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from bench.synth_ranks import RankPlan, write_rank_traces
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.ops import compute_run_ops
from tests.helpers.catalog_backends import admin
from tests.helpers.s3_server import CREDENTIALS, REGION, new_bucket
from tests.helpers.support import serve_subprocess
from tests.runs.jobs.conftest import stop

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PG = "postgresql://postgres@127.0.0.1:5432"
PREFIX = "team"
EIGHT_RANKS = RankPlan(world=8, steps=10, units=250)  # ~1.3 MB a file
THREE_RANKS = RankPlan(world=3, steps=10, units=600, late_rank=1, late_ns=3_000_000)  # other content


@dataclass
class Team:
    url: str
    bucket: str
    endpoint: str
    env: dict[str, str]
    folder: Path
    replicas: list[str] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def sql(self, query: str, *args: Any) -> list[dict[str, Any]]:
        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as conn:
            cursor = conn.execute(query, args)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def start_worker(self) -> subprocess.Popen[bytes]:
        n = len(self.workers)
        log = self.folder / f"worker-{n}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-c", "from api.cli import main; main()", "worker",
                                     "--data-dir", str(self.folder / f"worker-{n}")],
                                    stdout=out, stderr=subprocess.STDOUT, env=self.env)
        proc.log = log  # type: ignore[attr-defined]
        self.workers.append(proc)
        wait_for(lambda: "Starting worker on queues" in log.read_text(), f"worker {n} to start", self.tail)
        return proc

    def upload(self, base: str, files: list[Path], name: str) -> str:
        r = httpx.post(f"{base}/api/runs", files=[("files", (f.name, f.read_bytes())) for f in files],
                       data={"name": name}, timeout=60)
        assert r.status_code == 202, r.text
        return str(r.json()["id"])

    def wait_run(self, base: str, run_id: str, timeout: float = 120) -> dict[str, Any]:
        run: dict[str, Any] = {}

        def done() -> bool:
            run.update(httpx.get(f"{base}/api/runs/{run_id}").json())
            return run["status"] in ("ready", "failed")

        wait_for(done, f"run {run_id}", self.tail, timeout)
        return run

    def jobs(self, run_id: str) -> list[dict[str, Any]]:
        return self.sql("SELECT task_name, status::text AS status, attempts FROM procrastinate_jobs "
                        "WHERE args->>'run_id' = %s ORDER BY id", run_id)

    def objects(self) -> list[str]:
        s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                          aws_access_key_id=CREDENTIALS["key"], aws_secret_access_key=CREDENTIALS["secret"])
        try:
            keys: list[str] = []
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
                keys += [o["Key"] for o in page.get("Contents", [])]
            return keys
        finally:
            s3.close()

    def tail(self) -> str:
        return "\n".join(f"--- {p.log}\n" + p.log.read_text()[-3000:] for p in self.workers)  # type: ignore[attr-defined]


def wait_for(check: Callable[[], bool], what: str, tail: Callable[[], str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; worker logs:\n{tail()}"
        time.sleep(0.1)


def took(proc: subprocess.Popen[bytes], run_id: str) -> list[str]:
    """The jobs of `run_id` a worker says it took: 'ingest', 'parse of NAME', 'merge'."""
    return re.findall(rf"took job \d+ \((.+?) of run {run_id}", proc.log.read_text())  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[Team]:
    name = "team_" + secrets.token_hex(6)
    with admin(f"{PG}/postgres") as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    folder = tmp_path_factory.mktemp("team")
    bucket = new_bucket(s3_endpoint)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
           "EXPLORER_CATALOG_URL": f"{PG}/{name}", "EXPLORER_STORAGE": f"s3://{bucket}/{PREFIX}",
           "EXPLORER_INGEST_QUEUE": "postgres", "AWS_ENDPOINT_URL_S3": s3_endpoint, "AWS_REGION": REGION,
           "AWS_ACCESS_KEY_ID": CREDENTIALS["key"], "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret"],
           # a dead worker is noticed after 3 s; a retry waits 1 s
           "EXPLORER_QUEUE_STALLED_S": "3", "EXPLORER_QUEUE_RETRY_WAIT_S": "1"}
    team = Team(f"{PG}/{name}", bucket, s3_endpoint, env, folder)
    try:
        upgraded = subprocess.run([sys.executable, "-c", "from api.cli import main; main()", "db", "upgrade",
                                   "--data-dir", str(folder / "migrate")], env=env, capture_output=True, text=True)
        assert upgraded.returncode == 0, upgraded.stderr
        with ExitStack() as stack:
            for replica in ("a", "b"):
                base, _ = stack.enter_context(serve_subprocess(folder / f"replica-{replica}", env=env))
                team.replicas.append(base)
            team.start_worker()
            team.start_worker()
            try:
                yield team
            finally:
                for proc in team.workers:
                    stop(proc)
    finally:
        with admin(f"{PG}/postgres") as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_rank_traces(tmp_path_factory.mktemp("eight"), EIGHT_RANKS)


def test_an_eight_file_run_is_shared_by_the_workers_and_served_alike_by_both_replicas(
        team: Team, eight: list[Path]) -> None:
    a, b = team.replicas
    run_id = team.upload(a, eight, "eight ranks")
    run = team.wait_run(a, run_id)
    assert run["status"] == "ready", run
    wait_for(lambda: {j["status"] for j in team.jobs(run_id)} == {"succeeded"}, "the jobs to end", team.tail)
    jobs = team.jobs(run_id)  # the run is ready a moment before its merge job is marked done
    assert [j["task_name"] for j in jobs] == ["explorer.ingest"] + ["explorer.parse"] * 8 + ["explorer.merge"]
    first, second = (took(w, run_id) for w in team.workers[:2])
    assert first and second, (first, second)  # both workers took jobs of this run
    assert sorted(first + second) == sorted(["ingest", "merge", *(f"parse of {f.name}" for f in eight)])

    # replica B never saw the upload: it reads the run from the catalog and the bucket
    span = run["summary"]["span_ns"]
    for path in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/ops", f"/api/runs/{run_id}/kernels",
                 f"/api/runs/{run_id}/timeline?start_ns=0&end_ns={span}&width_px=1600",
                 f"/api/runs/{run_id}/timeline?start_ns={span // 3}&end_ns={span // 2}&width_px=800",
                 f"/api/runs/{run_id}/ranks"):
        on_a, on_b = httpx.get(a + path, timeout=60), httpx.get(b + path, timeout=60)
        assert on_a.status_code == on_b.status_code == 200, (path, on_a.text[:300], on_b.text[:300])
        assert on_a.json() == on_b.json(), path
    ops = httpx.get(f"{b}/api/runs/{run_id}/ops").json()
    assert ops["rows"], ops  # a real op table, not two equal empty answers

    share = httpx.post(f"{a}/api/runs/{run_id}/share")
    assert share.status_code == 201, share.text
    token = share.json()["token"]
    shared_a, shared_b = httpx.get(f"{a}/s/{token}"), httpx.get(f"{b}/s/{token}")
    assert shared_a.status_code == shared_b.status_code == 200
    assert "eight ranks" in shared_b.text
    assert httpx.get(f"{a}/api/s/{token}").json() == httpx.get(f"{b}/api/s/{token}").json()
    assert _without_nonces(shared_a.text) == _without_nonces(shared_b.text)


def test_a_worker_killed_mid_job_costs_only_time(team: Team, tmp_path: Path) -> None:
    a, b = team.replicas
    files = write_rank_traces(tmp_path / "three", THREE_RANKS)
    run_id = team.upload(b, files, "three ranks")  # this time through replica B
    # the worker that takes the run's first job is held inside it (its first status update waits for the run's
    # row, locked here) and killed there with SIGKILL
    with psycopg.connect(team.url) as lock:
        lock.execute("SELECT id FROM runs WHERE id = %s FOR UPDATE", (run_id,))
        wait_for(lambda: any(took(w, run_id) for w in team.workers), "a worker to take a job", team.tail)
        victim = next(w for w in team.workers if took(w, run_id))
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        lock.rollback()
    assert httpx.get(f"{a}/api/runs/{run_id}").json()["status"] == "queued"  # nothing half-done is visible
    run = team.wait_run(a, run_id)
    assert run["status"] == "ready", run
    survivor = next(w for w in team.workers if w.poll() is None)
    assert "handed back to the queue" in survivor.log.read_text(), team.tail()  # type: ignore[attr-defined]
    wait_for(lambda: {j["status"] for j in team.jobs(run_id)} == {"succeeded"}, "the jobs to end", team.tail)
    jobs = team.jobs(run_id)
    assert (jobs[0]["task_name"], jobs[0]["attempts"]) == ("explorer.ingest", 2), jobs  # the killed job, again
    assert took(survivor, run_id)[0] == "ingest"
    # the run is whole: replica A serves the same op table as an ingest of the same files on its own
    here = RunStore(tmp_path / "inline")
    try:
        want = ingest_paths(here, files)
        assert run["summary"]["slices"] == want.summary.slices and run["summary"]["tracks"] == want.summary.tracks
        ops = httpx.get(f"{a}/api/runs/{run_id}/ops").json()["rows"]
        assert ops == httpx.get(f"{b}/api/runs/{run_id}/ops").json()["rows"]
        assert {r["name"]: r["calls"] for r in ops} == {
            r["name"]: r["calls"] for r in compute_run_ops(Run.of(here, want.id))["rows"]}
    finally:
        here.catalog.close()


def test_no_orphans_in_the_catalog_the_queue_or_the_bucket(team: Team) -> None:
    """Runs by the two tests above (this one runs after them): everything stored belongs to a ready run."""
    runs = team.sql("SELECT id, status, location FROM runs ORDER BY created_at")
    assert [r["status"] for r in runs] == ["ready", "ready"], runs
    assert team.sql("SELECT run_id FROM explorer_ingest_fanout") == []
    assert team.sql("SELECT id FROM procrastinate_jobs WHERE status::text <> 'succeeded'") == []
    published = {r["location"] or f"runs/{r['id']}" for r in runs}
    keys = team.objects()
    assert keys
    strays = [k for k in keys if not any(k.startswith(f"{PREFIX}/{p}/") for p in published)]
    assert strays == [], strays  # no uploads, parts or unpublished attempts left behind
    for replica in team.folder.glob("replica-*"):
        assert not any((replica / "tmp").rglob("*.json")), replica


def _without_nonces(html: str) -> str:
    """The page less what differs by design between two requests: CSP nonces, and the minute the report was
    generated (the two replicas answered either side of a minute's turn once)."""
    html = re.sub(r"report generated [^<]*</div>", "report generated</div>", html)
    return re.sub(r"nonce-[A-Za-z0-9+/=_-]+|nonce=\"[^\"]+\"", "nonce", html)
