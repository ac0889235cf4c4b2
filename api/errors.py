"""The one map from typed errors to HTTP: every error leaves the server as one JSON shape.

`{"error": {"code", "message", "detail"}}`, except for a browser asking for a page, which gets the same error as
an HTML page (error.html); unexpected exceptions become a 500 with a generic message and are logged here, never
sent to the client with a stack trace.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import with_config
from starlette.exceptions import HTTPException as StarletteHTTPException
from typing_extensions import TypedDict

from explorer.errors import (
    BadRequest,
    BadTrace,
    CatalogUnavailable,
    DeviceProfileNotFound,
    DiskFull,
    EventNotFound,
    ExplorerError,
    Forbidden,
    IngestBug,
    MissingExtra,
    QueryRejected,
    RunNotFound,
    RunNotReady,
    ServerBusy,
    ShareNotFound,
    StorageUnavailable,
    TooLarge,
    TooManyAttempts,
    Unauthorized,
    UnsafeArchive,
    UnsafePickle,
    UploadFailed,
)
from explorer.model.shapes import STRICT

log = logging.getLogger(__name__)

# The one map from typed errors to HTTP statuses: a row per ExplorerError class (tests/api/test_errors.py
# fails when a class has none). The body carries the class's `code`.
STATUS_BY_ERROR: dict[type[ExplorerError], int] = {
    ExplorerError: 400,  # a user-facing error with no more specific class
    BadRequest: 400,
    BadTrace: 400,
    UnsafeArchive: 400,
    UnsafePickle: 400,
    QueryRejected: 400,
    Unauthorized: 401,
    Forbidden: 403,
    RunNotFound: 404,
    EventNotFound: 404,
    ShareNotFound: 404,
    DeviceProfileNotFound: 404,
    RunNotReady: 409,
    TooLarge: 413,
    DiskFull: 507,  # no space left for an upload or its ingest (Insufficient Storage)
    TooManyAttempts: 429,  # failed authentications from one address (api/middleware/access.py), with Retry-After
    ServerBusy: 503,
    StorageUnavailable: 503,  # --storage names no usable storage, or a run's files cannot be fetched from it
    MissingExtra: 503,  # a team-server setting (PostgreSQL, the job queue, S3) without the `team` extra installed
    CatalogUnavailable: 503,  # the catalog database does not answer or needs `trace-explorer db upgrade`
    IngestBug: 500,  # a parser bug (explorer.runs.ingest's guard); stored on the failed run, logged with its traceback
    UploadFailed: 502,  # raised by the upload client about the server it talks to, never by the server
}
# Errors the framework raises (routing, validation) carry a status; this names their code.
CODE_BY_STATUS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                  405: "method_not_allowed", 409: "conflict", 413: "too_large", 422: "validation",
                  429: "rate_limited", 507: "disk_full"}


@with_config(STRICT)
class ErrorDetail(TypedDict):
    code: str
    message: str
    detail: Any


@with_config(STRICT)
class ErrorBody(TypedDict):
    """The one error shape, as /openapi.json documents it."""

    error: ErrorDetail


# Declared on every operation (create_app passes it to FastAPI): the statuses a request can be answered with
# (never 500, which is a bug). 422 replaces FastAPI's own validation schema: _validation_error sends ErrorBody.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what} for status, what in (
        (400, "bad request: a parameter out of range, a bad trace, a refused query"),
        (401, "a token is required"),
        (403, "a state-changing request from another origin without the bearer header (api/middleware/guard.py)"),
        (404, "no such run, event, share or device profile"),
        (409, "the run is not ready"),
        (413, "too large"),
        (422, "a parameter does not validate"),
        (429, "too many failed authentications from this address; Retry-After says when to try again"),
        (503, "busy: every SQL slot is taken; try again"),
        (507, "no space left in the data folder for this upload"),
    )
}


def status_of(error: ExplorerError) -> int:
    """The HTTP status of a typed error: its class's row, else (logged: the table lacks a row) its nearest
    listed ancestor's; ExplorerError itself has a row, so there always is one."""
    if type(error) not in STATUS_BY_ERROR:
        log.error("no HTTP status for %s in STATUS_BY_ERROR; using its nearest listed ancestor's", type(error).__name__)
    return next(STATUS_BY_ERROR[cls] for cls in type(error).__mro__ if cls in STATUS_BY_ERROR)


def error_body(code: str, message: str, detail: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "detail": detail}}


def error_response(code: str, message: str, detail: Any, status: int,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message, detail), status_code=status, headers=headers)


def explorer_error_response(error: ExplorerError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The response for a typed error: the one JSON shape, with the status from STATUS_BY_ERROR (and Retry-After
    where its detail says when to try again: `retry_after_s`)."""
    if isinstance(error.detail, dict) and isinstance(wait := error.detail.get("retry_after_s"), int):
        headers = {"Retry-After": str(wait), **(headers or {})}
    return error_response(error.code, error.message, _plain(error.detail), status_of(error), headers=headers)


# Paths whose errors stay JSON whatever the client accepts: the API, health, assets, the OpenAPI document.
JSON_PATHS = ("/api/", "/-/", "/static/", "/openapi.json")
TITLE_BY_STATUS = {400: "Bad request", 401: "Sign-in needed", 403: "Not allowed", 404: "Not found",
                   409: "Not ready", 413: "Too large", 422: "Bad parameter", 503: "Unavailable"}


def wants_html(request: Request) -> bool:
    """A browser asking for a page: an HTML error page instead of the JSON error (which stays for /api and for
    clients that do not accept text/html)."""
    path = request.url.path[len(request.scope.get("root_path", "")):] if request.scope.get("root_path") else request.url.path
    return "text/html" in request.headers.get("accept", "") and not path.startswith(JSON_PATHS)


def error_page(request: Request, code: str, message: str, status: int,
               headers: dict[str, str] | None = None) -> Response:
    """The error as a page of the site (base.html: the same header, CSP and theme), the message escaped."""
    from api.templating import templates_for  # the page layer; loaded only when a page failed
    from explorer.views.render import APP_SCRIPTS

    settings = request.app.state.explorer.settings
    page = SimpleNamespace(title=TITLE_BY_STATUS.get(status, "Error"), message=message, status=status, code=code,
                           twin="", run=None)
    context = {"page": page, "base": request.scope.get("root_path", ""), "inline": None, "active": "",
               "needs_plotly": False, "scripts": APP_SCRIPTS, "readonly": False, "device_profiles": [],
               "rank_count": 0, "has_collectives": False}
    return templates_for(settings.templates_dir, settings.static_dir).TemplateResponse(
        request, "error.html", context, status_code=status, headers=headers)


async def _explorer_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ExplorerError)
    if wants_html(request):
        return error_page(request, exc.code, exc.message, status_of(exc))
    return explorer_error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                for e in exc.errors()]
    first = problems[0] if problems else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"][1:]) or "request"
    if wants_html(request):
        return error_page(request, "validation", f"{where}: {first['msg']}", 422)
    return error_response("validation", f"{where}: {first['msg']}", problems, 422)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = CODE_BY_STATUS.get(exc.status_code, "error")
    headers = dict(exc.headers) if exc.headers else None
    if wants_html(request) and exc.status_code in TITLE_BY_STATUS:
        return error_page(request, code, str(exc.detail), exc.status_code, headers=headers)
    return error_response(code, str(exc.detail), None, exc.status_code, headers=headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response("internal", "internal server error (see the server log)", None, 500)


def errors_as_json_in_schema(app: FastAPI) -> None:
    """/openapi.json says what the server does: an error is JSON even where the success is not (the CSV
    downloads; FastAPI lists every response of a route under the route's media type)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    for status, response in operation.get("responses", {}).items():
                        content = response.get("content", {})
                        if status[:1] in "45" and "application/json" not in content and content:
                            response["content"] = {"application/json": next(iter(content.values()))}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


async def _run_page_not_ready(request: Request, exc: Exception) -> Response:
    from api.deps import RunPageNotReady
    from api.templating import not_ready_page  # the page layer; loaded only when a page asked

    assert isinstance(exc, RunPageNotReady)
    return not_ready_page(request, request.app.state.explorer, exc.run)


def install_error_handlers(app: FastAPI) -> None:
    from api.deps import RunPageNotReady

    app.add_exception_handler(RunPageNotReady, _run_page_not_ready)
    app.add_exception_handler(ExplorerError, _explorer_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    errors_as_json_in_schema(app)


def _plain(detail: Any) -> Any:
    """Detail must be JSON: anything else is shown as text."""
    if detail is None or isinstance(detail, str | int | float | bool | list | dict):
        return detail
    return str(detail)
