"""Typed errors of the explorer, server and client alike; api/errors.py maps each class to one HTTP status
in one table (STATUS_BY_ERROR), and a test fails when a class here has no row there."""

from __future__ import annotations

from typing import Any, ClassVar


class ExplorerError(Exception):
    """Base class: a user-facing message plus a stable machine code and optional detail. A subclass names
    its own code (`class X(ExplorerError, code="x")`); one without a code is an error at import."""

    code: ClassVar[str] = "error"

    def __init_subclass__(cls, code: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = code

    def __init__(self, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class BadTrace(ExplorerError, code="bad_trace"):
    """An input file cannot be read as any supported trace format."""

    def __init__(self, filename: str, problem: str, detail: Any = None) -> None:
        super().__init__(f"{filename}: {problem}", detail)
        self.filename = filename
        self.problem = problem


class UnsafeArchive(BadTrace, code="unsafe_archive"):
    """An archive member would escape the extraction folder, is a link, or is too large."""


class UnsafePickle(BadTrace, code="unsafe_pickle"):
    """A pickle (an allocator snapshot) asks to load a class or call a function: refused, nothing of it runs."""


class IngestBug(ExplorerError, code="ingest_bug"):
    """An ingest hit an unexpected exception: a bug in a parser, not in the input. explorer.runs.ingest turns it
    into this one-line error (stored on the failed run) and logs the traceback as a bug report."""


class TooLarge(ExplorerError, code="too_large"):
    """An upload is larger than the server's limit (Settings.max_upload_bytes)."""


class DiskFull(ExplorerError, code="disk_full"):
    """A folder the explorer writes to (the data folder's tmp/, its runs) has no space left, or not enough for
    what is coming: the message names the folder, the space free and the space needed. Nothing of the
    upload or ingest is left behind."""


class RunNotFound(ExplorerError, code="run_not_found"):
    """No run has this id (or no run matches this reference: `message` says how)."""

    def __init__(self, run_id: str, message: str | None = None) -> None:
        super().__init__(message or f"no run with id {run_id!r}")
        self.run_id = run_id


class EventNotFound(ExplorerError, code="event_not_found"):
    """The run has no slice with this id."""


class ShareNotFound(ExplorerError, code="share_not_found"):
    """A share token that is unknown, revoked, or not one of the run's."""


class RunNotReady(ExplorerError, code="run_not_ready"):
    """The run is still queued or ingesting, or its ingest failed."""


class BadRequest(ExplorerError, code="bad_request"):
    """A parameter is out of range or names something that does not exist (a column, a view, a run)."""


class QueryRejected(ExplorerError, code="query_rejected"):
    """A SQL query was refused (writes, file/network access) or failed."""


class Forbidden(ExplorerError, code="forbidden"):
    """The request is understood but not allowed from where it came (another origin)."""


class ServerBusy(ExplorerError, code="busy"):
    """Every slot for this kind of work is taken; the same request later will be served."""


class Unauthorized(ExplorerError, code="unauthorized"):
    """The server requires a token and the request carries none that matches."""


class TooManyAttempts(ExplorerError, code="rate_limited"):
    """Too many failed authentications from one client address in the last minute
    (Settings.auth_failures_per_minute); the response's Retry-After says when to try again."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message, {"retry_after_s": retry_after_s})
        self.retry_after_s = retry_after_s


class UploadFailed(ExplorerError, code="upload_failed"):
    """The server refused the upload, could not be reached, or the run's ingest failed (the upload client)."""


class DeviceProfileNotFound(ExplorerError, code="device_profile_not_found"):
    """A run has no device profile by that id, or the schema has no table by that name."""


class CatalogUnavailable(ExplorerError, code="catalog_unavailable"):
    """The catalog cannot be used: its URL is malformed, its database does not answer, or its schema is at
    another revision than this version's (`trace-explorer db upgrade` brings it up to date)."""


class StorageUnavailable(ExplorerError, code="storage_unavailable"):
    """The run storage cannot be used: its URL (--storage) is malformed or names an unsupported scheme, or
    a run's files cannot be read from it."""


class MissingExtra(ExplorerError, code="missing_extra"):
    """A feature needs libraries that only an optional extra installs (the team server's PostgreSQL driver,
    job queue and S3 client are the `team` extra); the message names the extra and the install command."""


TEAM_EXTRA_INSTALL = "pip install 'trace-explorer[team]' (from a checkout: pip install '.[team]')"


def require_extra(module: str, feature: str, extra: str = "team") -> None:
    """Import `module` or raise MissingExtra naming `feature` and the extra that brings it."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as exc:
        how = TEAM_EXTRA_INSTALL if extra == "team" else f"pip install 'trace-explorer[{extra}]'"
        raise MissingExtra(f"{feature} needs the '{extra}' extra ({module} is not installed): {how}") from exc
