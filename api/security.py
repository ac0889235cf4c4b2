"""Access control and server timing, as one pure-ASGI middleware in front of every request.

With a token set, a request needs it as `Authorization: Bearer`, the `explorer_token` cookie or
`?token=` (which also sets the cookie so pages work in a browser). `/-/health` and `/static/` are
open. A share token (`/s/{token}`, `/api/s/{token}`, the `explorer_share` cookie or the
`X-Share-Token` header) opens read-only access to its one run. Every response carries
`Server-Timing: app;dur=<ms>`.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from api.errors import explorer_error_response
from explorer.errors import Unauthorized
from explorer.store.catalog import Catalog

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_COOKIE = "explorer_token"
SHARE_COOKIE = "explorer_share"
SHARE_HEADER = "x-share-token"
OPEN_PREFIXES = ("/-/health", "/static/")
SHARE_LANDING = re.compile(r"^(?:/api)?/s/([A-Za-z0-9_-]{8,64})/?$")
RUN_PATH = re.compile(r"^/(?:api/)?runs/([A-Za-z0-9]+)(/.*)?$")
SHARE_DENIED_SUFFIXES = ("/share", "/shares")


class AccessMiddleware:
    def __init__(self, app: ASGIApp, token: str | None, catalog: Catalog) -> None:
        self.app = app
        self.token = token
        self.catalog = catalog

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = _relative_path(scope)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        cookies = _cookies(headers.get("cookie", ""))
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        set_cookies: list[str] = []
        landing = SHARE_LANDING.match(path)
        secure = scope.get("scheme") == "https"  # behind a TLS proxy too, once it is trusted (--forwarded-allow-ips)
        if landing and self._share_run(landing.group(1)):
            set_cookies.append(_cookie(SHARE_COOKIE, landing.group(1), secure))
        if self.token and not path.startswith(OPEN_PREFIXES) and not landing:
            given = _bearer(headers) or cookies.get(TOKEN_COOKIE) or (query.get("token") or [""])[0]
            if given and secrets.compare_digest(given, self.token):
                if query.get("token") and cookies.get(TOKEN_COOKIE) != given:
                    set_cookies.append(_cookie(TOKEN_COOKIE, given, secure))
            elif not self._share_allows(scope["method"], path, headers.get(SHARE_HEADER) or cookies.get(SHARE_COOKIE)):
                response = explorer_error_response(Unauthorized(
                    "this server requires a token: send `Authorization: Bearer <token>`, or open the link with "
                    "?token=<token>"), headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"server-timing", f"app;dur={(time.perf_counter() - started) * 1000:.3f}".encode())]
                extra += [(b"set-cookie", c.encode("latin-1")) for c in set_cookies]
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _share_run(self, token: str | None) -> str | None:
        if not token:
            return None
        share = self.catalog.resolve_share(token)
        return share.run_id if share and not share.revoked else None

    def _share_allows(self, method: str, path: str, token: str | None) -> bool:
        """Read-only access to the shared run: GET its API and pages, POST its read-only SQL."""
        run_id = self._share_run(token)
        match = RUN_PATH.match(path)
        if run_id is None or match is None or match.group(1) != run_id:
            return False
        rest = match.group(2) or ""
        if rest.rstrip("/").endswith(SHARE_DENIED_SUFFIXES) or "/shares/" in rest:
            return False
        return method in ("GET", "HEAD") or (method == "POST" and rest == "/sql" and path.startswith("/api/"))


def _relative_path(scope: Scope) -> str:
    path: str = scope.get("path", "/")
    root: str = scope.get("root_path", "")
    return path[len(root):] or "/" if root and path.startswith(root) else path


def _bearer(headers: dict[str, str]) -> str:
    auth = headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


def _cookies(header: str) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed Cookie header means no cookies, not a 500
        return {}
    return {k: m.value for k, m in jar.items()}


def _cookie(name: str, value: str, secure: bool) -> str:
    return f"{name}={value}; Path=/; HttpOnly; SameSite=Lax" + ("; Secure" if secure else "")
