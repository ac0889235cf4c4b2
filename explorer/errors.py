"""Typed errors of the explorer core; the API maps each `code` to one HTTP status in one place."""

from __future__ import annotations

from typing import Any


class ExplorerError(Exception):
    """Base class: a user-facing message plus a stable machine code and optional detail."""

    code = "error"

    def __init__(self, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class BadTrace(ExplorerError):
    """An input file cannot be read as any supported trace format."""

    code = "bad_trace"

    def __init__(self, filename: str, problem: str, detail: Any = None) -> None:
        super().__init__(f"{filename}: {problem}", detail)
        self.filename = filename
        self.problem = problem


class UnsafeArchive(BadTrace):
    """An archive member would escape the extraction folder, is a link, or is too large."""

    code = "unsafe_archive"


class TooLarge(ExplorerError):
    code = "too_large"


class RunNotFound(ExplorerError):
    code = "run_not_found"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class EventNotFound(ExplorerError):
    code = "event_not_found"


class RunNotReady(ExplorerError):
    code = "run_not_ready"


class BadRequest(ExplorerError):
    code = "bad_request"


class QueryRejected(ExplorerError):
    """A SQL query was refused (writes, file/network access) or failed."""

    code = "query_rejected"


class Unauthorized(ExplorerError):
    code = "unauthorized"


class DeviceProfileNotFound(ExplorerError):
    """A run has no device profile by that id, or the schema has no table by that name."""

    code = "device_profile_not_found"
