"""HTTP client of a running explorer: upload files, folders and archives as one run, then wait for it. The
body is streamed from disk with an exact Content-Length (folders as a temporary .tar.gz that keeps their
layout); nothing prints here: the CLI passes callbacks."""

from __future__ import annotations

import secrets
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from explorer.errors import UploadFailed

CHUNK = 1 << 20
TERMINAL = ("ready", "failed")

BytesProgress = Callable[[int, int], None]     # (sent, total)
IngestProgress = Callable[[float, str], None]  # (fraction, what)


@dataclass(frozen=True)
class UploadPart:
    """One file of the multipart body: the name the server sees and where its bytes are."""

    filename: str
    path: Path


@dataclass
class UploadResult:
    run_id: str
    status: str
    message: str
    url: str
    duplicate_of: str | None


def normalize_server(server: str) -> str:
    """`host:8000` -> `http://host:8000`; no trailing slash."""
    server = server.strip()
    if "://" not in server:
        server = "http://" + server
    return server.rstrip("/")


def prepare_parts(paths: list[Path], tmp_dir: Path) -> list[UploadPart]:
    """Files and archives as they are; each folder packed into `<folder>.tar.gz` under tmp_dir."""
    parts: list[UploadPart] = []
    for path in paths:
        if path.is_dir():
            archive = tmp_dir / f"{path.resolve().name or 'upload'}.tar.gz"
            with tarfile.open(archive, "w:gz", compresslevel=1) as tar:  # traces compress ~10x even at 1
                for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
                    tar.add(file, arcname=f"{archive.name[:-7]}/{file.relative_to(path).as_posix()}")
            parts.append(UploadPart(archive.name, archive))
        elif path.is_file():
            parts.append(UploadPart(path.name, path))
        else:
            raise UploadFailed(f"{path}: no such file or folder")
    if not parts:
        raise UploadFailed("nothing to upload")
    return parts


class MultipartBody:
    """A multipart/form-data body streamed from disk: text fields, then the `files` parts."""

    def __init__(self, fields: dict[str, str], parts: list[UploadPart]) -> None:
        self.boundary = "trace-explorer-" + secrets.token_hex(12)
        self.fields = fields
        self.parts = parts

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def _field_head(self, name: str) -> bytes:
        return f'--{self.boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()

    def _file_head(self, part: UploadPart) -> bytes:
        filename = part.filename.replace("\\", "_").replace('"', "%22").replace("\r", "").replace("\n", "")
        return (f'--{self.boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n").encode()

    def _tail(self) -> bytes:
        return f"--{self.boundary}--\r\n".encode()

    def __len__(self) -> int:
        n = sum(len(self._field_head(k)) + len(v.encode()) + 2 for k, v in self.fields.items())
        n += sum(len(self._file_head(p)) + p.path.stat().st_size + 2 for p in self.parts)
        return n + len(self._tail())

    def iter_bytes(self, on_bytes: Callable[[int], None] | None = None) -> Iterator[bytes]:
        def emit(chunk: bytes) -> bytes:
            if on_bytes:
                on_bytes(len(chunk))
            return chunk

        for key, value in self.fields.items():
            yield emit(self._field_head(key) + value.encode() + b"\r\n")
        for part in self.parts:
            yield emit(self._file_head(part))
            with part.path.open("rb") as f:
                while chunk := f.read(CHUNK):
                    yield emit(chunk)
            yield emit(b"\r\n")
        yield emit(self._tail())


def error_message(response: httpx.Response) -> str:
    """The server's `{"error": {"message"}}`, else the start of the body."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return f"{body['error'].get('message', '')} ({body['error'].get('code', response.status_code)})"
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return f"HTTP {response.status_code}: {response.text[:300]}"


def upload_run(server: str, paths: list[Path], *, name: str | None = None, tags: list[str] | None = None,
               token: str | None = None, on_bytes: BytesProgress | None = None,
               on_ingest: IngestProgress | None = None, wait: bool = True, poll_s: float = 0.5,
               timeout_s: float = 3600.0, transport: httpx.BaseTransport | None = None) -> UploadResult:
    """POST the files as one run to `server` and (with `wait`) poll until it is ready or failed."""
    base = normalize_server(server)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx.Timeout(30.0, read=600.0, write=600.0)
    fields: dict[str, str] = {}
    if name:
        fields["name"] = name
    if tags:
        fields["tags"] = ",".join(tags)
    with tempfile.TemporaryDirectory(prefix="trace-explorer-upload-") as tmp, \
            httpx.Client(base_url=base, headers=headers, timeout=timeout, transport=transport) as client:
        body = MultipartBody(fields, prepare_parts(paths, Path(tmp)))
        total = len(body)
        sent = 0

        def count(n: int) -> None:
            nonlocal sent
            sent += n
            if on_bytes:
                on_bytes(sent, total)

        try:
            response = client.post("/api/runs", content=body.iter_bytes(count), headers={
                "Content-Type": body.content_type, "Content-Length": str(total)})
        except httpx.HTTPError as exc:
            raise UploadFailed(f"cannot upload to {base}: {exc}") from exc
        if response.status_code not in (200, 201, 202):
            raise UploadFailed(f"upload refused: {error_message(response)}")
        created = response.json()
        run_id = str(created["id"])
        result = UploadResult(run_id, str(created.get("status", "queued")), "", f"{base}/runs/{run_id}",
                              created.get("duplicate_of"))
        if not wait:
            return result
        return _wait_ready(client, result, on_ingest, poll_s, timeout_s)


def _wait_ready(client: httpx.Client, result: UploadResult, on_ingest: IngestProgress | None,
                poll_s: float, timeout_s: float) -> UploadResult:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            response = client.get(f"/api/runs/{result.run_id}")
        except httpx.HTTPError as exc:
            raise UploadFailed(f"lost the server while waiting for run {result.run_id}: {exc}") from exc
        if response.status_code != 200:
            raise UploadFailed(f"cannot read run {result.run_id}: {error_message(response)}")
        run = response.json()
        result.status = str(run.get("status", ""))
        result.message = str(run.get("message") or "")
        if on_ingest:
            on_ingest(float(run.get("progress") or 0.0), result.message or result.status)
        if result.status == "failed":
            raise UploadFailed(f"ingest of run {result.run_id} failed: {result.message or 'no message'}")
        if result.status in TERMINAL:
            return result
        if time.monotonic() > deadline:
            raise UploadFailed(f"run {result.run_id} still {result.status} after {timeout_s:.0f} s")
        time.sleep(poll_s)


__all__ = ["MultipartBody", "UploadPart", "UploadResult", "normalize_server",
           "prepare_parts", "upload_run"]
