"""The agent tools on the running server at `/mcp` (MCP streamable HTTP, stateless, JSON answers): mounted inside
the app, so the same middleware stands in front of it as in front of the API (api/guard.py: Host and Origin;
api/security.py: the token). Without the `mcp` extra installed nothing is mounted and `/mcp` is a 404."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from fastapi import FastAPI
from starlette.routing import Route

from api.state import AppState

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"


def mount_mcp(app: FastAPI, state: AppState) -> AbstractAsyncContextManager[None]:
    """Mount the tools at MCP_PATH; the context manager the app's lifespan enters to run their session manager."""
    try:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings
    except ImportError:
        log.info("the mcp extra is not installed: no agent tools at %s", MCP_PATH)
        return nullcontext()

    from api.mcp.registry import build_server

    server = build_server(state, local=False)
    # Host and Origin are api/guard.py's to check, for /mcp as for every path: the SDK's own check is off
    manager = StreamableHTTPSessionManager(
        app=server._lowlevel_server, json_response=True, stateless=True,  # noqa: SLF001 - the SDK's documented mount
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    # a route (not a mount): `/mcp` itself answers, with no redirect to `/mcp/`
    app.router.routes.append(Route(MCP_PATH, StreamableHTTPASGIApp(manager), include_in_schema=False))

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return running()
