"""`trace-explorer worker`: run the ingest queue's jobs until stopped, and hand back the jobs of workers that
died (kill -9, a lost machine): procrastinate's heartbeats say which; a job handed back too often fails its run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from procrastinate import exceptions as queue_errors
from procrastinate.jobs import Job, Status

from explorer.config import Settings
from explorer.runs.jobs.queue import QUEUE, IngestQueue
from explorer.store.runs import RunStore

log = logging.getLogger(__name__)

POLL_S = 5.0  # procrastinate's default: the longest a retry waits past its time
BEATS_PER_TIMEOUT = 3  # a worker beats this many times per queue_stalled_s: one late beat is not a death


def run_worker(settings: Settings, concurrency: int) -> None:
    """Work until SIGINT/SIGTERM (procrastinate's handlers: running jobs finish first)."""
    asyncio.run(_work(settings, concurrency))


async def _work(settings: Settings, concurrency: int) -> None:
    store = RunStore.from_settings(settings)
    queue = IngestQueue(settings, store, concurrency)
    name = f"{socket.gethostname()}:{os.getpid()}"
    try:
        async with queue.app.open_async():
            await asyncio.to_thread(queue.check_schema)
            swept = await asyncio.to_thread(queue.sweep_shared)
            if swept:
                log.info("worker %s: removed the shared files of %d finished runs", name, len(swept))
            log.info("worker %s: %d at once, on the queue at %s", name, concurrency, store.catalog.url)
            watch = asyncio.create_task(hand_back_stalled(queue), name="stalled jobs")
            try:
                await queue.app.run_worker_async(
                    queues=[QUEUE], name=name, concurrency=concurrency,
                    update_heartbeat_interval=settings.queue_stalled_s / BEATS_PER_TIMEOUT,
                    stalled_worker_timeout=settings.queue_stalled_s, install_signal_handlers=True,
                    # a retry waiting for its time is not announced (NOTIFY is for new jobs): polled for
                    fetch_job_polling_interval=min(POLL_S, float(settings.queue_retry_wait_s)))
            finally:
                watch.cancel()
    finally:
        store.catalog.close()


async def hand_back_stalled(queue: IngestQueue) -> None:
    """Every half queue_stalled_s: the jobs whose worker has not beaten for queue_stalled_s go back to the queue
    (every worker looks; the first to hand a job back wins, the others' attempt is refused and ignored)."""
    timeout = queue.settings.queue_stalled_s
    while True:
        await asyncio.sleep(timeout / 2)
        try:
            for job in await queue.app.job_manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=timeout):
                await hand_back(queue, job)
        except Exception:  # the database is away: the next round tries again
            log.warning("could not look for stalled jobs", exc_info=True)


async def hand_back(queue: IngestQueue, job: Job) -> None:
    run_id = str(job.task_kwargs.get("run_id", ""))
    most = queue.settings.queue_max_attempts
    manager = queue.app.job_manager
    try:
        if job.attempts + 1 >= most:
            await manager.finish_job(job, status=Status.FAILED, delete_job=False)
            log.warning("job %s (%s of run %s): its worker died on the last attempt", job.id, job.task_name, run_id)
            await asyncio.to_thread(queue.fail_run, run_id, f"the worker running its {job.task_name} job died "
                                    f"{most} times (killed, or out of memory?)")
        else:
            await manager.retry_job(job)
            log.warning("job %s (%s of run %s): its worker stopped beating; handed back to the queue (attempt %d "
                        "of %d next)", job.id, job.task_name, run_id, job.attempts + 2, most)
    except queue_errors.ConnectorException:  # another worker handed it back first
        log.info("job %s was handed back by another worker", job.id)
