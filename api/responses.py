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
