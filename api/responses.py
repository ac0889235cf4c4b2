"""Fast JSON responses: msgspec encodes large column payloads (timeline windows) many times faster
than FastAPI's generic encoder, and handlers that return these skip that encoder entirely."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
from fastapi.responses import JSONResponse

_encoder = msgspec.json.Encoder(enc_hook=lambda obj: _encode_extra(obj))


def _encode_extra(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


class FastJSONResponse(JSONResponse):  # a JSONResponse, so OpenAPI documents its response_model
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _encoder.encode(content)


def fast_json(content: Any, status_code: int = 200) -> FastJSONResponse:
    return FastJSONResponse(content, status_code=status_code)


class HeadAsGet:
    """HEAD on any GET route (docs/API.md: share links allow GET/HEAD): the request is routed as a GET and
    the body is dropped, the headers (content-length included) kept, as HTTP says a HEAD answer is."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Any) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)
