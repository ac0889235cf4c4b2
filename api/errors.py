"""The one map from typed errors to HTTP: every error leaves the server as one JSON shape.

`{"error": {"code", "message", "detail"}}`; unexpected exceptions become a 500 with a generic
message and are logged here, never sent to the client with a stack trace.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from explorer.errors import ExplorerError

log = logging.getLogger(__name__)

STATUS_BY_CODE: dict[str, int] = {
    "bad_request": 400,
    "bad_trace": 400,
    "unsafe_archive": 400,
    "query_rejected": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "run_not_found": 404,
    "event_not_found": 404,
    "share_not_found": 404,
    "method_not_allowed": 405,
    "run_not_ready": 409,
    "too_large": 413,
    "validation": 422,
}
CODE_BY_STATUS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                  405: "method_not_allowed", 409: "conflict", 413: "too_large", 422: "validation"}


def error_body(code: str, message: str, detail: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "detail": detail}}


def error_response(code: str, message: str, detail: Any = None, status: int | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message, detail), status_code=status or STATUS_BY_CODE.get(code, 400),
                        headers=headers)


async def _explorer_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ExplorerError)
    return error_response(exc.code, exc.message, _plain(exc.detail))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                for e in exc.errors()]
    first = problems[0] if problems else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"][1:]) or "request"
    return error_response("validation", f"{where}: {first['msg']}", problems, 422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = CODE_BY_STATUS.get(exc.status_code, "error")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(code, str(exc.detail), None, exc.status_code, headers=headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response("internal", "internal server error (see the server log)", None, 500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ExplorerError, _explorer_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


def _plain(detail: Any) -> Any:
    """Detail must be JSON: anything else is shown as text."""
    if detail is None or isinstance(detail, str | int | float | bool | list | dict):
        return detail
    return str(detail)
