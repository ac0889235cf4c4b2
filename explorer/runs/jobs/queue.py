"""The ingest queue: a procrastinate App on the catalog's PostgreSQL, its three tasks (`explorer.ingest`,
`explorer.parse` per Chrome/Kineto file, `explorer.merge` once), the fan-out counter that starts a merge
once, and enqueueing. Job bodies are explorer.runs.jobs.tasks; running them is explorer.runs.jobs.worker."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
from procrastinate import exceptions as queue_errors
from procrastinate.retry import RetryStrategy

from explorer.config import Settings
from explorer.errors import CatalogUnavailable
from explorer.ingest.limits import IngestLimits
from explorer.runs.jobs.shared import SharedFiles
from explorer.runs.jobs.tasks import TRANSIENT, IngestJobs
from explorer.store.catalog.db import parse_catalog_url
from explorer.store.runs import RunStore

log = logging.getLogger(__name__)

QUEUE = "ingest"  # procrastinate's queue name: workers listen to this one only
INGEST, PARSE, MERGE = "explorer.ingest", "explorer.parse", "explorer.merge"
SCHEMA_LOCK = 0x7472_6163_6571  # pg_advisory_lock key: one process applies the queue's schema at a time
MIN_MEMORY_MB = 64  # as explorer.ingest.parallel: DuckDB ran out of memory at 40

# One row per fanned-out run: how many parse jobs, which member indexes are parsed (a set: a retried job
# counts once), and the plan the merge needs. The UPDATE that adds an index locks the row, so exactly one
# parse job sees the last index arrive: that one enqueues the merge.
FANOUT_DDL = """
CREATE TABLE IF NOT EXISTS explorer_ingest_fanout (
    run_id text PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    total integer NOT NULL,
    parsed integer[] NOT NULL DEFAULT '{}',
    plan jsonb NOT NULL
)"""
START_FANOUT = """
INSERT INTO explorer_ingest_fanout (run_id, total, plan) VALUES (%(run_id)s, %(total)s, %(plan)s)
ON CONFLICT (run_id) DO UPDATE SET total = EXCLUDED.total, plan = EXCLUDED.plan"""
MARK_PARSED = """
UPDATE explorer_ingest_fanout
   SET parsed = CASE WHEN %(index)s::integer = ANY(parsed) THEN parsed ELSE parsed || %(index)s::integer END
 WHERE run_id = %(run_id)s
RETURNING cardinality(parsed) AS done, total"""
IS_PARSED = "SELECT %(index)s::integer = ANY(parsed) AS done FROM explorer_ingest_fanout WHERE run_id = %(run_id)s"
GET_PLAN = "SELECT plan FROM explorer_ingest_fanout WHERE run_id = %(run_id)s"
END_FANOUT = "DELETE FROM explorer_ingest_fanout WHERE run_id = %(run_id)s"
HELD_RUNS = """
SELECT DISTINCT args->>'run_id' AS run_id FROM procrastinate_jobs
 WHERE queue_name = %(queue)s AND status IN ('todo', 'doing')"""


def queue_conninfo(settings: Settings) -> str:
    """The libpq URL of the catalog's database, where the queue lives; CatalogUnavailable when the catalog is
    not PostgreSQL (the embedded SQLite catalog cannot be shared by workers on other machines)."""
    if not settings.catalog_url:
        raise CatalogUnavailable("ingest_queue=postgres needs a PostgreSQL catalog: pass --catalog-url "
                                 "postgresql://user@host:5432/db (or set EXPLORER_CATALOG_URL)")
    url = parse_catalog_url(settings.catalog_url)
    if not url.drivername.startswith("postgresql"):
        raise CatalogUnavailable(f"ingest_queue=postgres needs a PostgreSQL catalog; {url.drivername} is not one "
                                 "(pass --catalog-url postgresql://user@host:5432/db)")
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def make_app(settings: Settings) -> procrastinate.App:
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=queue_conninfo(settings)))


def apply_queue_schema(settings: Settings) -> bool:
    """procrastinate's schema and the fan-out table in the catalog's database, each when missing (so it may
    run again); True when procrastinate's schema was applied now. After the catalog's own upgrade (the
    fan-out table refers to its runs)."""
    app = make_app(settings)
    # two upgrades at once: the second waits, then finds the schema there (procrastinate's is not IF NOT EXISTS)
    with psycopg.connect(queue_conninfo(settings), autocommit=True) as lock, app.open():
        lock.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        connector = app.connector.get_sync_connector()
        applied = not app.check_connection()
        if applied:
            app.schema_manager.apply_schema()
        connector.execute_query(FANOUT_DDL)
    return applied


def job_limits(settings: Settings, concurrency: int) -> IngestLimits:
    """The ingest limits of one job: the memory budget split between the jobs a worker runs at once."""
    limits = IngestLimits.from_settings(settings)
    return replace(limits, memory_mb=max(MIN_MEMORY_MB, limits.memory_mb // max(1, concurrency)))


class IngestQueue:
    """The queue as the web process (enqueue) and a worker (the tasks, the counter) see it. Open the app
    (`app.open()` synchronously, `app.open_async()` in a worker) before use."""

    def __init__(self, settings: Settings, store: RunStore, concurrency: int = 1) -> None:
        self.settings = settings
        self.store = store
        self.shared = SharedFiles(store.storage, store.tmp_dir / "queue-copies")
        self.app = make_app(settings)
        # the n-th retry of a transient failure waits queue_retry_wait_s**n s; bad input (ExplorerError) is
        # never retried: the job marks its run failed and raises
        retry: RetryStrategy | bool = False  # RetryStrategy(max_attempts=0) would retry for ever
        if settings.queue_max_attempts > 1:
            retry = RetryStrategy(max_attempts=settings.queue_max_attempts - 1,
                                  exponential_wait=settings.queue_retry_wait_s, retry_exceptions=TRANSIENT)
        self.jobs = jobs = IngestJobs(self, job_limits(settings, concurrency))
        self.ingest_task = self.app.task(name=INGEST, queue=QUEUE, retry=retry, pass_context=True)(jobs.ingest)
        self.parse_task = self.app.task(name=PARSE, queue=QUEUE, retry=retry, pass_context=True)(jobs.parse)
        self.merge_task = self.app.task(name=MERGE, queue=QUEUE, retry=retry, pass_context=True)(jobs.merge)

    @property
    def _db(self) -> Any:
        return self.app.connector.get_sync_connector()

    def sweep_shared(self) -> list[str]:
        """Remove the shared files of runs that are no longer queued or ingesting (ready, failed, deleted: a job
        killed after its run ended leaves them); returns those run ids. Every run's record exists before its
        shared files do, so a run being enqueued is never taken for one of these."""
        files = self.shared.runs()
        unfinished = {rec.id for rec in self.store.catalog.unfinished()} if files else set()
        gone = [run_id for run_id in files if run_id not in unfinished]
        for run_id in gone:
            self.shared.delete(run_id)
        return gone

    def check_schema(self) -> None:
        if not self.app.check_connection():
            raise CatalogUnavailable("the catalog's database has no job queue yet: run `trace-explorer db upgrade "
                                     "--catalog-url URL` once")

    def enqueue(self, run_id: str, folder: Path, paths: list[Path]) -> int:
        """Hand an uploaded run to the workers: its folder goes to the shared files, one `explorer.ingest`
        job onto the queue (the web process parses nothing). Returns the job id."""
        relative: list[Any] = [p.relative_to(folder).as_posix() for p in paths]  # JSON for the job's args
        self.shared.put(folder, f"{run_id}/upload")
        job_id: int = self.ingest_task.configure(queueing_lock=f"ingest:{run_id}").defer(run_id=run_id,
                                                                                          paths=relative)
        log.info("run %s: ingest job %d queued", run_id, job_id)
        return job_id

    def fail_run(self, run_id: str, message: str) -> None:
        self.jobs.fail_run(run_id, message)

    def held_runs(self) -> set[str]:
        """Runs with a job waiting or running (a dead worker's job counts until it is handed back)."""
        return {row["run_id"] for row in self._db.execute_query_all(HELD_RUNS, queue=QUEUE)}

    # ---- the fan-out counter (called from the jobs, in a worker) -------------------------------------

    def start_fanout(self, run_id: str, plan: dict[str, Any]) -> None:
        self._db.execute_query(START_FANOUT, run_id=run_id, total=len(plan["members"]), plan=plan)

    def mark_parsed(self, run_id: str, index: int) -> tuple[int, int]:
        """Count member `index` of the run parsed; returns (parsed, total) as they are after this."""
        row = self._db.execute_query_one(MARK_PARSED, run_id=run_id, index=index)
        return int(row["done"]), int(row["total"])

    def is_parsed(self, run_id: str, index: int) -> bool:
        rows = self._db.execute_query_all(IS_PARSED, run_id=run_id, index=index)
        return bool(rows and rows[0]["done"])

    def fanout_plan(self, run_id: str) -> dict[str, Any] | None:
        rows = self._db.execute_query_all(GET_PLAN, run_id=run_id)
        return dict(rows[0]["plan"]) if rows else None

    def end_fanout(self, run_id: str) -> None:
        self._db.execute_query(END_FANOUT, run_id=run_id)

    def defer_parse(self, **kwargs: Any) -> None:
        self._defer(self.parse_task, f"parse:{kwargs['run_id']}:{kwargs['index']}", kwargs)

    def defer_merge(self, run_id: str) -> None:
        """The merge, at most one waiting (queueing lock) and never two running (lock) for a run; a merge of a
        run already finished does nothing (explorer.runs.jobs.tasks), so a duplicate costs nothing."""
        self._defer(self.merge_task, f"merge:{run_id}", {"run_id": run_id}, lock=f"merge:{run_id}")

    def _defer(self, task: Any, queueing_lock: str, kwargs: dict[str, Any], lock: str | None = None) -> None:
        try:
            job_id = task.configure(queueing_lock=queueing_lock, lock=lock).defer(**kwargs)
        except queue_errors.AlreadyEnqueued:  # a retried job enqueues what its first attempt did
            log.info("job %s is already waiting", queueing_lock)
            return
        log.info("queued %s as job %d", queueing_lock, job_id)
