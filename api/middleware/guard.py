"""Where requests may come from, as one pure-ASGI middleware in front of everything (outside the access
check): the Host header (against DNS rebinding), the origin of state-changing requests (no cross-site
upload or share with the cookie alone), and the security headers (nosniff, same-origin referrer, the page
CSP). The rules: docs/security.md, "Origins, headers and paths"."""

from __future__ import annotations

from urllib.parse import urlsplit

from api.errors import explorer_error_response
from api.middleware.access import ASGIApp, Message, Receive, Scope, Send
from explorer.config import Settings
from explorer.errors import BadRequest, Forbidden
from explorer.views.render import FRAME_ANCESTORS, PAGE_CSP

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The Host names this server answers to; None for any."""
    given = {h.strip().lower().strip("[]") for h in settings.allowed_hosts if h.strip()}
    if "*" in given or (settings.host in WILDCARD_BINDS and not given):
        return None
    bound = set() if settings.host in WILDCARD_BINDS else {settings.host.lower().strip("[]")}
    return frozenset(LOOPBACK_NAMES | bound | given)


def host_name(netloc: str) -> str:
    """`Example.com:8000` -> `example.com`, `[::1]:8000` -> `::1`."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1:netloc.find("]")] if "]" in netloc else netloc
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


class OriginGuard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.hosts = allowed_hosts(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        error = self._refusal(scope["method"], host, headers)
        if error is not None:
            await explorer_error_response(error)(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _secured(list(message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, method: str, host: str, headers: dict[str, str]) -> BadRequest | Forbidden | None:
        if self.hosts is not None and host_name(host) not in self.hosts:
            return BadRequest(f"this server does not answer to the host name {host_name(host)!r}; start it with "
                              "--allowed-hosts NAME to serve under that name")
        if method not in MUTATING or headers.get("authorization", "").lower().startswith("bearer "):
            return None
        origin = headers.get("origin")
        if origin is None:
            return None if headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none") else Forbidden(
                "a cross-site request cannot change anything here")
        netloc = urlsplit(origin).netloc.lower()
        if netloc == host.lower() or (self.hosts is not None and host_name(netloc) in self.hosts - LOOPBACK_NAMES):
            return None
        return Forbidden(f"a request from {origin!r} cannot change anything here (it is another origin); "
                         "scripts send `Authorization: Bearer <token>`")


def _secured(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    names = {k.lower() for k, _ in headers}
    extra = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]
    ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
    if ctype.startswith(b"text/html"):
        if b"content-security-policy" in names:
            headers = [(k, v + b"; frame-ancestors " + FRAME_ANCESTORS.encode()
                        if k.lower() == b"content-security-policy" and b"frame-ancestors" not in v else v)
                       for k, v in headers]
        else:
            extra.append((b"content-security-policy", f"{PAGE_CSP}; frame-ancestors {FRAME_ANCESTORS}".encode()))
    return headers + [h for h in extra if h[0] not in names]
