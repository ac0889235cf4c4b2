"""Ingest on the PostgreSQL queue, end to end: uploads through the web app in queue mode, real `trace-explorer
worker` processes, a real database. Several workers share a multi-file run and its tables equal the inline
ingest's; bad input fails once; a transient error is retried; a worker killed with SIGKILL mid-job has its job
handed to another; a queued run survives another process's start-up; nothing is left in the scratch folder."""

from __future__ import annotations

import gzip
import os
import re
import signal
from pathlib import Path

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from api.app import create_app
from api.cli import main
from bench.synth_ranks import RankPlan, write_rank_traces
from explorer.config import Settings
from explorer.errors import CatalogUnavailable
from explorer.model.tables import TABLE_SCHEMAS
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from tests.helpers.support import serve_subprocess
from tests.runs.jobs.conftest import ROOT, Deployment, queue_settings

SIX_RANKS = RankPlan(world=6, steps=2, units=3, late_rank=4, late_ns=2_000_000)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_rank_traces(tmp_path_factory.mktemp("ranks"), SIX_RANKS)


def took(log: Path) -> list[str]:
    """The jobs a worker says it took: 'ingest', 'parse of NAME', 'merge'."""
    return re.findall(r"took job \d+ \((.+?) of run ", log.read_text())


def test_two_workers_share_a_multi_file_run_and_it_equals_the_inline_ingest(
        deployment: Deployment, ranks: list[Path], tmp_path: Path) -> None:
    with deployment.workers(2) as (first, second):
        run_id = deployment.upload(ranks)
        run = deployment.wait_run(run_id)
    assert run["status"] == "ready", run
    jobs = deployment.jobs(run_id)
    assert [j["task_name"] for j in jobs] == ["explorer.ingest"] + ["explorer.parse"] * 6 + ["explorer.merge"]
    assert {(j["status"], j["attempts"]) for j in jobs} == {("succeeded", 1)}  # each ran once
    logs = [took(first.log), took(second.log)]  # type: ignore[attr-defined]
    assert all(logs), logs  # both took jobs
    assert sorted(sum(logs, [])) == sorted(["ingest", "merge", *(f"parse of {f.name}" for f in ranks)])

    inline = RunStore(tmp_path / "inline")
    want = ingest_paths(inline, ranks)
    queued = RunStore(deployment.data, catalog_url=deployment.url)
    try:
        for table in TABLE_SCHEMAS:
            if (inline.run_dir(want.id) / f"{table}.parquet").exists():
                assert queued.table(run_id, table).equals(inline.table(want.id, table)), table
        assert queued.get(run_id).summary == want.summary
        assert queued.get(run_id).sha256 == want.sha256
    finally:
        queued.catalog.close()
        inline.catalog.close()
    assert deployment.sql("SELECT run_id FROM explorer_ingest_fanout") == []
    assert deployment.scratch() == []


def test_compressed_files_are_decompressed_once_and_shared_with_the_parse_jobs(
        deployment: Deployment, ranks: list[Path], tmp_path: Path) -> None:
    gz = []
    for f in (ranks[0], ranks[4]):
        gz.append(tmp_path / f"{f.name}.gz")
        gz[-1].write_bytes(gzip.compress(f.read_bytes()))
    with deployment.workers(1) as (worker,):
        run = deployment.wait_run(deployment.upload(gz))
    assert run["status"] == "ready", run
    assert took(worker.log) == ["ingest", *(f"parse of {f.name}" for f in (ranks[0], ranks[4])), "merge"]  # type: ignore[attr-defined]
    inline = RunStore(tmp_path / "inline")
    queued = RunStore(deployment.data, catalog_url=deployment.url)
    try:
        want = ingest_paths(inline, gz)
        assert queued.table(run["id"], "slices").equals(inline.table(want.id, "slices"))
        assert queued.get(run["id"]).summary == want.summary
    finally:
        queued.catalog.close()
        inline.catalog.close()
    assert deployment.scratch() == []


def test_a_bad_file_fails_its_run_once_with_its_message(deployment: Deployment, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1')
    with deployment.workers(1):
        run_id = deployment.upload([bad])
        run = deployment.wait_run(run_id)
    assert run["status"] == "failed"
    assert "broken.json" in run["message"], run
    assert [(j["task_name"], j["status"], j["attempts"]) for j in deployment.jobs(run_id)] == [
        ("explorer.ingest", "failed", 1)]  # not retried
    assert deployment.scratch() == []


def test_a_transient_error_is_retried_and_the_run_completes(deployment: Deployment, ranks: list[Path]) -> None:
    """The shared upload folder is missing when the first attempt runs (FileNotFoundError: an OSError, as a
    shared folder that is not mounted yet), and back before the retry."""
    run_id = deployment.upload(ranks[:1])
    upload = deployment.data / "queue" / run_id / "upload"
    away = upload.with_name("away")
    upload.rename(away)
    with deployment.workers(1):
        retrying = deployment.wait_run(run_id, lambda run: "retrying" in run["message"])
        assert "attempt 1 of 3" in retrying["message"] and retrying["status"] != "failed", retrying
        away.rename(upload)
        run = deployment.wait_run(run_id)
    assert run["status"] == "ready", run
    assert [(j["status"], j["attempts"]) for j in deployment.jobs(run_id)] == [("succeeded", 2)]
    assert deployment.scratch() == []


def test_a_transient_error_that_persists_fails_the_run_after_the_last_attempt(deployment: Deployment,
                                                                              ranks: list[Path]) -> None:
    run_id = deployment.upload(ranks[2:3])
    upload = deployment.data / "queue" / run_id / "upload"
    upload.rename(upload.with_name("gone"))
    with deployment.workers(1):
        run = deployment.wait_run(run_id)
    assert run["status"] == "failed"
    assert run["message"].startswith("ingest failed 3 times; the last time: FileNotFoundError"), run
    assert [(j["status"], j["attempts"]) for j in deployment.jobs(run_id)] == [("failed", 3)]  # EXPLORER_QUEUE_MAX_ATTEMPTS
    assert deployment.scratch() == []


def test_a_killed_worker_s_job_is_retried_by_another(deployment: Deployment, ranks: list[Path]) -> None:
    """Worker A takes the run's first job and is held inside it (the test locks the run's catalog row, so A's
    first status update waits); A is killed with SIGKILL there. Its heartbeat stops: after
    EXPLORER_QUEUE_STALLED_S worker B hands the job back to the queue, runs it, and the run completes."""
    run_id = deployment.upload(ranks[:3])
    with psycopg.connect(deployment.url) as lock:
        lock.execute("SELECT id FROM runs WHERE id = %s FOR UPDATE", (run_id,))
        killed = deployment.start_worker()
        deployment.wait_for(lambda: [j["status"] for j in deployment.jobs(run_id)] == ["doing"], "A to take the job")
        deployment.wait_for(lambda: "took job" in killed.log.read_text(), "A to start the job")  # type: ignore[attr-defined]
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        lock.rollback()
    assert deployment.run(run_id)["status"] == "queued"  # nothing half-done is visible
    with deployment.workers(1) as (other,):
        run = deployment.wait_run(run_id)
    assert run["status"] == "ready", run
    assert "handed back to the queue" in other.log.read_text()  # type: ignore[attr-defined]
    first = deployment.jobs(run_id)[0]
    assert (first["task_name"], first["status"], first["attempts"]) == ("explorer.ingest", "succeeded", 2)
    assert took(other.log)[0] == "ingest"  # type: ignore[attr-defined]
    assert deployment.scratch() == []


def test_a_merge_killed_midway_runs_again_on_another_worker(deployment: Deployment, ranks: list[Path]) -> None:
    """Worker A parses the files; the merge waits behind a stand-in job holding its procrastinate lock until the
    test has locked the run's catalog row, so A takes the merge and waits inside it; A is killed there. B hands
    the merge back and runs it from the same parts (a merge reads them, it does not consume them)."""
    run_id = deployment.upload(ranks[1:3])
    blocker = deployment.sql("INSERT INTO procrastinate_jobs (queue_name, task_name, lock, args, status) VALUES "
                             "('elsewhere', 'stand-in', %s, '{}', 'doing') RETURNING id", f"merge:{run_id}")[0]["id"]
    killed = deployment.start_worker()
    deployment.wait_for(lambda: [(j["task_name"], j["status"]) for j in deployment.jobs(run_id)][-1] == (
        "explorer.merge", "todo") and all(j["status"] == "succeeded" for j in deployment.jobs(run_id)[:-1]),
        "the parse jobs to finish")
    with psycopg.connect(deployment.url) as lock:
        lock.execute("SELECT id FROM runs WHERE id = %s FOR UPDATE", (run_id,))
        deployment.sql("UPDATE procrastinate_jobs SET status = 'succeeded' WHERE id = %s", blocker)
        deployment.wait_for(lambda: deployment.jobs(run_id)[-1]["status"] == "doing", "A to take the merge")
        deployment.wait_for(lambda: "(merge of run" in killed.log.read_text(), "A to start the merge")  # type: ignore[attr-defined]
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        lock.rollback()
    assert deployment.run(run_id)["status"] == "ingesting"
    with deployment.workers(1) as (other,):
        run = deployment.wait_run(run_id)
    assert run["status"] == "ready", run
    assert took(other.log) == ["merge"]  # type: ignore[attr-defined]
    merge = deployment.jobs(run_id)[-1]
    assert (merge["task_name"], merge["status"], merge["attempts"]) == ("explorer.merge", "succeeded", 2)
    assert deployment.sql("SELECT run_id FROM explorer_ingest_fanout") == []
    assert deployment.scratch() == []


def test_a_queued_run_survives_another_process_starting(deployment: Deployment, ranks: list[Path]) -> None:
    """A queued run holds no lease: a second web process's start-up recover must leave it (and its upload in
    the shared folder) alone; a worker started later ingests it."""
    run_id = deployment.upload(ranks[5:])  # files no other test uploads: not a duplicate
    with pytest.MonkeyPatch.context() as mp:  # the run is not young any more: only the queue's word keeps it
        mp.setattr("explorer.store.runs.LEASE_S", 0.0)
        state = create_app(queue_settings(deployment.url, deployment.data)).state.explorer
        state.ingester.shutdown()
        state.store.catalog.close()
    assert deployment.run(run_id)["status"] == "queued"
    with deployment.workers(1):
        run = deployment.wait_run(run_id)
    assert run["status"] == "ready", run


def test_queue_mode_refuses_a_catalog_that_is_not_postgresql(tmp_path: Path) -> None:
    with pytest.raises(CatalogUnavailable, match="needs a PostgreSQL catalog"):
        # the embedded catalog, whatever EXPLORER_CATALOG_URL says (the PostgreSQL switch sets it)
        create_app(Settings(data_dir=tmp_path / "data", catalog_url="", ingest_queue="postgres"))


def test_db_upgrade_applies_the_queue_schema_once(deployment: Deployment) -> None:
    again = CliRunner().invoke(main, ["db", "upgrade", "--catalog-url", deployment.url, "--data-dir",
                                      str(deployment.data)])
    assert again.exit_code == 0, again.output
    assert "job queue schema present: nothing to do" in again.output


def test_serve_with_ingest_queue_postgres_enqueues_for_a_worker(deployment: Deployment, ranks: list[Path]) -> None:
    """The real server process (`serve --ingest-queue postgres`) only enqueues: with no worker the run stays
    queued; a worker ingests it."""
    with serve_subprocess(deployment.data, "--catalog-url", deployment.url, "--ingest-queue", "postgres",
                          env={"PYTHONPATH": str(ROOT)}) as (base, _):
        files = [("files", (f.name, f.read_bytes())) for f in ranks[3:5]]
        r = httpx.post(f"{base}/api/runs", files=files)
        assert r.status_code == 202, r.text
        run_id = r.json()["id"]
        assert [j["task_name"] for j in deployment.jobs(run_id)] == ["explorer.ingest"]
        assert httpx.get(f"{base}/api/runs/{run_id}").json()["status"] == "queued"
        with deployment.workers(1):
            run = deployment.wait_run(run_id)
    assert run["status"] == "ready", run


def test_a_watched_folder_in_queue_mode_queues_its_runs(deployment: Deployment, ranks: list[Path],
                                                        tmp_path: Path) -> None:
    """`serve --watch` on a team server: the web process's watcher queues each ready group (a copy of its files,
    as an upload) and a worker ingests it; the watched files stay where they are."""
    from explorer.runs.ingesters import QueuedIngester
    from explorer.runs.watch import Watcher

    state = deployment.client.app.state.explorer  # type: ignore[attr-defined]
    assert isinstance(state.ingester, QueuedIngester)
    logdir = tmp_path / "logs"
    logdir.mkdir()
    source = ranks[0].read_bytes().replace(b'"rank": 0', b'"rank": 0, "watched": 1')  # not an earlier upload
    staged = tmp_path / "w.tmp"
    staged.write_bytes(source)
    staged.rename(logdir / "host_1.1700000000000.pt.trace.json")  # appears by rename: complete at once
    watcher = Watcher(state.store, [logdir], poll_s=0.1, settle_s=0, ingester=state.ingester)
    deadline = 50
    queued: list[str] = []
    while not queued and deadline:
        queued = watcher.poll()
        deadline -= 1
    assert len(queued) == 1, "the watcher queued nothing"
    run_id = queued[0]
    assert [j["task_name"] for j in deployment.jobs(run_id)] == ["explorer.ingest"]
    with deployment.workers(1):
        run = deployment.wait_run(run_id)
    assert run["status"] == "ready", run
    assert (logdir / "host_1.1700000000000.pt.trace.json").read_bytes() == source
    assert "watch" in run["tags"]
    assert watcher.poll() == []  # once only
    assert deployment.scratch() == []
