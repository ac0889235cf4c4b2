"""The static files (the project's JS and CSS, and plotly.js from the installed package) at
`/static/<path>?v=<content hash>`: the current hash is cached by the browser for good, a bare URL is
revalidated every time, an old hash redirects to the current one. Each file is gzipped once, not per request."""

from __future__ import annotations

import gzip
import mimetypes
from functools import lru_cache
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from explorer.views.render import Assets

IMMUTABLE = "public, max-age=31536000, immutable"
MEDIA_TYPES = {".js": "application/javascript", ".css": "text/css", ".json": "application/json"}
REVALIDATE = "no-cache"  # a URL without the hash may change content: the browser asks (ETag) each time


def mount_assets(app: FastAPI, assets: Assets) -> None:
    """Serve `assets` under /static/ (the path `explorer.views.render.Assets.url` writes)."""

    @app.get("/static/{rel:path}", include_in_schema=False)
    def static_asset(rel: str, request: Request, v: str | None = None) -> Response:
        path, digest = assets.path(rel), assets.digest(rel)
        if path is None or digest is None:
            raise HTTPException(404, f"no static file {rel!r}")
        if v is not None and v != digest:  # a page from before the file changed: send it to today's file
            return RedirectResponse(request.scope.get("root_path", "") + assets.url(rel), status_code=307)
        etag = f'"{digest}"'
        headers = {"ETag": etag, "Cache-Control": IMMUTABLE if v == digest else REVALIDATE,
                   "Vary": "Accept-Encoding"}
        if etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        raw, packed = _contents(path, digest)
        media_type = MEDIA_TYPES.get(Path(rel).suffix) or mimetypes.guess_type(rel)[0] or "application/octet-stream"
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(packed, media_type=media_type, headers={**headers, "Content-Encoding": "gzip"})
        return Response(raw, media_type=media_type, headers=headers)


@lru_cache(maxsize=64)
def _contents(path: Path, digest: str) -> tuple[bytes, bytes]:
    """A file's bytes and their gzip, read and compressed once per content (`digest` keys the cache)."""
    raw = path.read_bytes()
    return raw, gzip.compress(raw, compresslevel=9, mtime=0)
