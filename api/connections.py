"""The server's connections: uvicorn's h11 protocol with the bounds it lacks for clients met without a proxy
(a header deadline, a body read timeout, a cap on open connections, a short linger after an early
response). Nothing here reads a request. The bounds and their settings: docs/security.md, "Connections"."""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from explorer.config import Settings

log = logging.getLogger(__name__)

FD_RESERVE = 256  # file descriptors kept for a burst of accepts (BACKLOG) and the server's own files
BACKLOG = 128  # asyncio accepts up to this many at once before a connection_made can close any
LINGER_S = 2.0  # after a response that left the body unread: how long the rest is read and dropped, at most...
LINGER_BYTES = 2**20  # ...and how much of it, so the client sees the response and a FIN, not a reset
MAX_HEADER_EVENT_BYTES = 64 * 1024  # h11's largest incomplete event: a request line and headers together
REPORT_EVERY_S = 60.0  # closed connections are logged as one line per reason at most this often


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    header_timeout_s: float
    body_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        return cls(usable_connections(settings.max_connections), settings.header_timeout_s, settings.body_timeout_s)


def usable_connections(wanted: int) -> int:
    """`wanted`, or fewer where this process's file-descriptor limit would not leave FD_RESERVE for its own files
    (the soft limit is raised to the hard one first, as a server does)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted + FD_RESERVE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FD_RESERVE))


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """What `serve` passes to uvicorn.run: the protocol below, and uvicorn's own bounds (its limit_concurrency
    answers 503 past it; the protocol keeps the connections under it, so it bounds requests in progress)."""
    limits = ConnectionLimits.from_settings(settings)
    return {"http": guarded_protocol(limits), "timeout_keep_alive": settings.keep_alive_s, "backlog": BACKLOG,
            "limit_concurrency": limits.max_connections + 1, "h11_max_incomplete_event_size": MAX_HEADER_EVENT_BYTES}


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """A protocol class for one server: its connections share the registry of those that may be closed first."""

    class Guarded(GuardedH11):
        pass

    Guarded.limits = limits
    Guarded.idle = {}
    Guarded.closed = Counter()
    return Guarded


class GuardedH11(H11Protocol):
    limits: ClassVar[ConnectionLimits]
    # connections idle between requests or waiting for a request's headers, the longest first (dict order)
    idle: ClassVar[dict[GuardedH11, None]]
    closed: ClassVar[Counter[str]]  # closed since the last report, by reason
    reported_at: ClassVar[float] = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._headers_since = 0.0  # when the request whose headers are awaited began
        self._last_data = 0.0
        self._lingered = -1  # bytes dropped after a response that left its body unread; -1: not lingering

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            victim = next(iter(self.idle), self)
            victim._close("connection limit")
            if victim is self:
                return
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self.idle.pop(self, None)
        self._cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingered >= 0:  # the response is sent: what still comes is dropped, up to a bound
            self._lingered += len(data)
            if self._lingered > LINGER_BYTES:
                self.transport.close()
            return
        self._last_data = time.monotonic()
        super().data_received(data)
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._timer is None:  # a new request's first bytes on a kept-alive connection: its headers' deadline
                self._await_headers()
        elif state is h11.SEND_BODY and (self._timer is None or self in self.idle):
            self.idle.pop(self, None)  # headers complete: the body's read timeout (_check reads _last_data)
            self._arm(self.limits.body_timeout_s)
        elif self in self.idle:
            self.idle.pop(self, None)
            self._cancel()

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self.server_state.total_requests += 1
            self._linger()
            return
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._cancel()  # uvicorn's keep-alive timer runs now; it may still go first at the cap
            self._headers_since = time.monotonic()
            self.idle[self] = None

    def _await_headers(self) -> None:
        self._headers_since = time.monotonic()
        self.idle[self] = None
        self._arm(self.limits.header_timeout_s)

    def _arm(self, delay: float) -> None:
        self._cancel()
        self._timer = self.loop.call_later(delay, self._check)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        """The timer: headers not complete by their deadline, or a body the server reads that stopped arriving."""
        self._timer = None
        if self.transport.is_closing() or self._lingered >= 0:
            return
        now = time.monotonic()
        state = self.conn.their_state
        if state is h11.IDLE and self in self.idle:
            left = self._headers_since + self.limits.header_timeout_s - now
            if left > 0:
                self._arm(left)
            else:
                self._close("request headers not complete in time")
        elif state is h11.SEND_BODY:
            left = self._last_data + self.limits.body_timeout_s - now
            if self.flow.read_paused:
                self._arm(self.limits.body_timeout_s)  # the app is not reading: its pace, not the client's
            elif left > 0:
                self._arm(left)
            else:
                self._close("request body stalled")

    def _linger(self) -> None:
        """The response went out before the request's body was read: read and drop what is in flight for a
        moment (so the client reads the response rather than a reset), then close; never the whole body."""
        self.idle.pop(self, None)
        self._cancel()
        self._lingered = 0
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._timer = self.loop.call_later(LINGER_S, self.transport.close)

    def _close(self, reason: str) -> None:
        self.idle.pop(self, None)
        self._cancel()
        self.transport.close()
        cls = type(self)
        cls.closed[reason] += 1
        now = time.monotonic()
        if now - cls.reported_at >= REPORT_EVERY_S:
            cls.reported_at = now
            log.warning("closed connections: %s", ", ".join(f"{n} ({why})" for why, n in cls.closed.items()))
            cls.closed.clear()
