"""Gzip for every response a client accepts it for: starlette's GZipMiddleware, except that the template
response's debug message (how the test client sees a page's context object) passes by it untouched."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.gzip import GZipMiddleware, GZipResponder, IdentityResponder
from starlette.types import ASGIApp, Message, Receive, Scope, Send

GZIP_MIN_BYTES = 1024  # smaller bodies gain little and cost a round of zlib
# level 5: most of level 9's ratio on JSON and HTML at a fraction of its time (a timeline window is
# compressed on every pan); static files arrive compressed already (api/static.py) and pass through
GZIP_LEVEL = 5


class Compression(GZipMiddleware):
    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app, minimum_size=GZIP_MIN_BYTES, compresslevel=GZIP_LEVEL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def app(scope: Scope, receive: Receive, compressing_send: Send) -> None:
            async def route(message: Message) -> None:
                await (send if message["type"] == "http.response.debug" else compressing_send)(message)

            await self.app(scope, receive, route)

        responder: IdentityResponder
        if "gzip" in Headers(scope=scope).get("Accept-Encoding", ""):
            responder = GZipResponder(app, self.minimum_size, compresslevel=self.compresslevel,
                                      thread_minimum_size=self.thread_minimum_size,
                                      exclude_content_types=self.exclude_content_types)
        else:
            responder = IdentityResponder(app, self.minimum_size, exclude_content_types=self.exclude_content_types)
        await responder(scope, receive, send)
