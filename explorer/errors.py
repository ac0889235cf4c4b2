"""Typed errors of the explorer, server and client alike; api/errors.py maps each class to one HTTP status
in one table (STATUS_BY_ERROR), and a test fails when a class here has no row there."""

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


class ShareNotFound(ExplorerError):
    """A share token that is unknown, revoked, or not one of the run's."""

    code = "share_not_found"


class RunNotReady(ExplorerError):
    code = "run_not_ready"


class BadRequest(ExplorerError):
    code = "bad_request"


class QueryRejected(ExplorerError):
    """A SQL query was refused (writes, file/network access) or failed."""

    code = "query_rejected"


class Unauthorized(ExplorerError):
    code = "unauthorized"


class UploadFailed(ExplorerError):
    """The server refused the upload, could not be reached, or the run's ingest failed (the upload client)."""

    code = "upload_failed"
