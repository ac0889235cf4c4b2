"""Access control and server timing, as one pure-ASGI middleware in front of every request: a token (bearer,
cookie or `?token=`) or a share token for one run, compared in constant time and rate-limited when wrong;
`/-/health` and `/static/` stay open, and every response carries `Server-Timing`. Who may do what:
docs/security.md, "Who may do what"."""

from __future__ import annotations

import hmac
import math
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from api.errors import explorer_error_response
from explorer.errors import TooManyAttempts, Unauthorized
from explorer.runs.store import Catalog

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


class FailedLogins:
    """Wrong tokens per client address over the last WINDOW_S seconds. Past `limit` of them the address is
    refused (retry_after) until its oldest failure leaves the window. Bounded: each address keeps at most
    `limit` times, and at most MAX_ADDRESSES addresses are tracked (the least recently failed go first)."""

    WINDOW_S = 60.0
    MAX_ADDRESSES = 10_000

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until `address` may try again, None when it may now."""
        times = self._failures.get(address)
        if not self.limit or times is None:
            return None
        now = self.clock()
        while times and times[0] <= now - self.WINDOW_S:
            times.popleft()
        if not times:
            del self._failures[address]
            return None
        return max(1, math.ceil(times[0] + self.WINDOW_S - now)) if len(times) >= self.limit else None

    def record(self, address: str) -> None:
        if not self.limit:
            return
        times = self._failures.pop(address, None) or deque(maxlen=self.limit)
        times.append(self.clock())
        self._failures[address] = times  # re-inserted: the dict's order is the order of last failure
        while len(self._failures) > self.MAX_ADDRESSES:
            del self._failures[next(iter(self._failures))]


class AccessMiddleware:
    def __init__(self, app: ASGIApp, token: str | None, catalog: Catalog, auth_failures_per_minute: int = 20) -> None:
        self.app = app
        self.token = token
        self.token_bytes = token.encode("utf-8") if token else b""
        self.catalog = catalog
        self.failures = FailedLogins(auth_failures_per_minute)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = _relative_path(scope)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        cookies = _cookies(headers.get("cookie", ""))
        set_cookies: list[bytes] = []
        landing = SHARE_LANDING.match(path)
        secure = scope.get("scheme") == "https"  # behind a TLS proxy too, once it is trusted (--forwarded-allow-ips)
        if landing and self._share_run(landing.group(1)):
            set_cookies.append(_cookie(SHARE_COOKIE, landing.group(1), secure))
        if self.token and not path.startswith(OPEN_PREFIXES) and not landing:
            # latin-1 both ways: each %XX escape, and each raw byte, is one byte of the value
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), encoding="latin-1")
            query_token = _wire((query.get("token") or [""])[0])
            cookie_token = _wire(cookies.get(TOKEN_COOKIE, ""))
            given = [t for t in (_wire(_bearer(headers)), cookie_token, query_token) if t]
            address = (scope.get("client") or ("",))[0] or ""
            wait = self.failures.retry_after(address) if given else None
            if wait is not None:
                response = explorer_error_response(TooManyAttempts(
                    f"too many wrong tokens from this address: try again in {wait} s", wait),
                    headers={"Retry-After": str(wait)})
                await response(scope, receive, send)
                return
            # every candidate is compared (no short cut on the first match): a stale cookie does not hide a
            # fresh ?token=, and the time taken does not say which one matched
            matches = [hmac.compare_digest(t, self.token_bytes) for t in given]
            if any(matches):
                if query_token and matches[-1] and cookie_token != query_token:
                    set_cookies.append(_cookie(TOKEN_COOKIE, self.token, secure))
            elif not self._share_allows(scope["method"], path, headers.get(SHARE_HEADER) or cookies.get(SHARE_COOKIE)):
                if given:
                    self.failures.record(address)
                response = explorer_error_response(Unauthorized(
                    "this server requires a token: send `Authorization: Bearer <token>`, or open the link with "
                    "?token=<token>"), headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"server-timing", f"app;dur={(time.perf_counter() - started) * 1000:.3f}".encode())]
                extra += [(b"set-cookie", c) for c in set_cookies]
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


def _wire(text: str) -> bytes:
    """A header-borne value as the bytes that came (headers are decoded as latin-1 above, and a cookie's octal
    escapes are bytes too); utf-8 for anything else, which then matches no token."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _cookie(name: str, value: str, secure: bool) -> bytes:
    """A Set-Cookie value; one that is not a plain token is quoted with octal escapes (which _cookies reads back)."""
    coded = SimpleCookie().value_encode(value.encode("utf-8").decode("latin-1"))[1]  # escaped byte by byte
    return (f"{name}={coded}; Path=/; HttpOnly; SameSite=Lax" + ("; Secure" if secure else "")).encode("latin-1")
