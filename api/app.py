"""create_app(settings): pages, REST API and static files on one port, wired from one Settings object."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.errors import ERROR_RESPONSES, install_error_handlers
from api.mcp.http import mount_mcp
from api.middleware.access import AccessMiddleware
from api.middleware.guard import OriginGuard
from api.middleware.gzip import Compression
from api.responses import HeadAsGet
from api.routes import (
    advice,
    apidocs,
    check,
    collectives,
    compare,
    device,
    export,
    fleet,
    kernels,
    memory,
    meta,
    neuron_v1,
    ops,
    overview,
    ranks,
    report,
    runs,
    share,
    sql,
    steps,
    timeline,
)
from api.state import AppState
from api.static import mount_assets
from explorer import __version__
from explorer.config import Settings
from explorer.errors import require_extra
from explorer.ingest.limits import IngestLimits
from explorer.runs.apart import IngestProcesses
from explorer.runs.ingesters import Ingester, InlineIngester, QueuedIngester
from explorer.runs.run import RunCache
from explorer.runs.watch import Watcher
from explorer.store.runs import RunStore
from explorer.views.render import assets_for

log = logging.getLogger(__name__)
WARM_AT_START = 2  # latest ready runs whose timeline index is built when the server starts


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    store = RunStore.from_settings(settings)
    try:
        worker = make_ingester(settings, store)
    except BaseException:  # no queue: no app, and no catalog connection left open
        store.catalog.close()
        raise
    interrupted = store.recover(worker.held_runs)
    if interrupted:
        log.warning("%d ingests were interrupted by the last shutdown; marked failed", interrupted)
    run_cache = RunCache.for_store(store, settings)
    state = AppState(settings, store, worker, run_cache)
    state.ingester.on_ready = run_cache.warm
    watcher = make_watcher(state)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # runs ingested by the CLI (or before a restart): index the latest in the background, so their
        # first timeline view does not wait for it
        threading.Thread(target=run_cache.warm_latest, args=(WARM_AT_START,), name="warm", daemon=True).start()
        if watcher is not None:
            watcher.start()
        async with agent_tools():  # the session manager of the MCP tools at /mcp (api/mcp/http.py)
            yield
        if watcher is not None:
            watcher.stop()
        state.ingester.shutdown()

    app = FastAPI(title="Trace Explorer", version=__version__, lifespan=lifespan,
                  docs_url=None, openapi_url="/openapi.json", responses=ERROR_RESPONSES)
    app.state.explorer = state
    install_error_handlers(app)
    # one module per page family, the page beside its JSON twin; each module's docstring says what it serves
    for router in (meta.router, runs.router, runs.pages, overview.router, timeline.router, timeline.pages,
                   ops.router, kernels.router, steps.router, compare.router, sql.router, sql.pages, share.router,
                   collectives.router, check.router, device.router, device.pages, export.router, neuron_v1.router,
                   ranks.router, ranks.pages, fleet.router, apidocs.router, memory.router, advice.router,
                   advice.pages, report.router):
        app.include_router(router)
    agent_tools = mount_mcp(app, state)
    mount_assets(app, assets_for(settings.static_dir))  # the static folder and plotly.js, content-hashed
    app.add_middleware(AccessMiddleware, token=settings.token, catalog=store.catalog,
                       auth_failures_per_minute=settings.auth_failures_per_minute)
    app.add_middleware(Compression)  # gzip: error and 401 bodies are compressed too
    app.add_middleware(HeadAsGet)  # HEAD is a GET for everything inside, its body dropped
    app.add_middleware(OriginGuard, settings=settings)  # outermost: Host and Origin before anything else
    return app


def make_ingester(settings: Settings, store: RunStore) -> Ingester:
    """Who ingests uploads: this process's threads, or (ingest_queue=postgres) the workers of the job queue in
    the catalog's database, whose schema must be there (`trace-explorer db upgrade`)."""
    if settings.ingest_queue == "inline":
        return InlineIngester(store, settings.ingest_workers, settings.max_uncompressed_bytes,
                            IngestLimits.from_settings(settings), IngestProcesses(settings))
    require_extra("procrastinate", "--ingest-queue postgres")
    from explorer.runs.jobs.queue import (
        IngestQueue,  # the team extra's libraries, loaded only by a queued server
    )

    queue = IngestQueue(settings, store)
    queue.app.open()
    try:
        queue.check_schema()
    except BaseException:
        queue.app.close()
        raise
    return QueuedIngester(store, queue)


def make_watcher(state: AppState) -> Watcher | None:
    """The log-folder watcher of `serve --watch DIR` (explorer/runs/watch.py), None when nothing is watched."""
    s = state.settings
    if not s.watch_dirs:
        return None
    return Watcher(state.store, s.watch_dirs, poll_s=s.watch_poll_s, settle_s=s.watch_settle_s,
                   stale_s=s.watch_stale_s, max_bytes=s.max_uncompressed_bytes, on_ready=state.runs.warm,
                   limits=IngestLimits.from_settings(s), ingester=state.ingester)
