"""The agent tools on the running server at `/mcp` (MCP streamable HTTP, stateless, JSON answers): mounted inside
the app, so the same middleware stands in front of it as in front of the API (api/middleware/guard.py: Host and Origin;
api/middleware/access.py: the token). Without the `mcp` extra installed nothing is mounted and `/mcp` is a 404."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from api.errors import explorer_error_response
from api.middleware.access import Receive, Scope, Send
from api.state import AppState
from explorer.errors import ServerBusy

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"
Lifespan = Callable[[], AbstractAsyncContextManager[None]]


class AgentTools:
    """The ASGI app at /mcp: the SDK's session manager of the app's current lifespan (a manager runs once, and a
    test client may enter an app's lifespan more than once); outside a lifespan, a 503."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.manager: Any = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        # Host and Origin are api/middleware/guard.py's to check, for /mcp as for every path: the SDK's own check is off
        manager = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server, json_response=True, stateless=True,  # noqa: SLF001 - documented mount
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:
            await explorer_error_response(ServerBusy("the agent tools start with the server; try again"))(
                scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)


def mount_mcp(app: FastAPI, state: AppState) -> Lifespan:
    """Mount the tools at MCP_PATH; what the app's lifespan enters to run them (nothing without the extra)."""
    try:
        from api.mcp.registry import build_server

        server = build_server(state, local=False)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        log.info("the mcp extra is not installed: no agent tools at %s", MCP_PATH)
        return nullcontext
    tools = AgentTools(server)
    # a route (not a mount): `/mcp` itself answers, with no redirect to `/mcp/`
    app.router.routes.append(Route(MCP_PATH, tools, include_in_schema=False))
    return tools.running
