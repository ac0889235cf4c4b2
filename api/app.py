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
from explorer.runs.ingesters import make_ingester
from explorer.runs.run import RunCache
from explorer.runs.store import RunStore
from explorer.runs.watch import make_watcher
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
    watcher = make_watcher(settings, store, state.ingester, run_cache.warm)

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


