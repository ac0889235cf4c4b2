"""Uploads: a multipart body streamed straight to files in the data folder (never whole in memory, size limit
and sha256 on the way, client paths reduced to safe parts) (who ingests them: explorer.runs.ingesters). Bounds:
docs/security.md, "Uploads"."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import shutil
import unicodedata
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from explorer.errors import BadRequest, ServerBusy, StorageUnavailable, TooLarge
from explorer.runs.ingest import disk_full, is_disk_full
from explorer.runs.ingesters import Upload

log = logging.getLogger(__name__)

MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 64  # text fields in one upload (name, tags, ...: a handful are used)
MAX_HEADER_BYTES = 16 * 1024  # one part's headers together
MAX_BOUNDARY = 70  # RFC 2046 §5.1.1
MAX_FILES = 1000
FREE_RESERVE_BYTES = 64 * 2**20  # left free beside a declared upload (the catalog, logs, the ingest's first writes)...
FREE_RESERVE_SHARE = 16  # ...or a 16th of the disk, where that is less (a small disk)
_EXTENDED_FILENAME = re.compile(r"filename\*\s*=\s*([A-Za-z0-9_-]+)'[^']*'([^;\s]+)")
FILE_FIELDS = ("files", "file")
QUEUE_RETRY_AFTER_S = 30  # what a 503 for a full upload queue asks the client to wait


def safe_filename(name: str) -> str:
    """The base name of a client-supplied path, reduced to letters and digits of any script and `._-`
    (NFC-normalised, so one name is one file name), never '', '.' or '..'."""
    base = unicodedata.normalize("NFC", re.split(r"[\\/]", name)[-1])
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in base).lstrip(".")
    return keep[:120] or "upload"


MAX_PATH_PARTS = 8


def safe_relpath(name: str) -> Path:
    """A client-supplied relative path (a dropped folder's `a/b/trace.json`) kept as a path, each
    part reduced like safe_filename; empty, '.' and '..' parts are dropped, so it cannot escape."""
    parts = [p for p in re.split(r"[\\/]", name) if p not in ("", ".", "..")][-MAX_PATH_PARTS:]
    return Path(*[safe_filename(p) for p in parts]) if parts else Path("upload")


class _Sink:
    """Callbacks for the multipart parser: file parts to disk (hashed, counted), small fields to memory."""

    def __init__(self, upload: Upload, max_bytes: int, queue_room: int | None = None) -> None:
        self.upload = upload
        self.max_bytes = max_bytes
        self.queue_room = queue_room  # bytes the upload queue has left (Settings.max_queued_bytes), None: no bound
        self.error: Exception | None = None
        self._headers: dict[str, str] = {}
        self._field = b""
        self._value = b""
        self._file: IO[bytes] | None = None
        self._hash: Any = None
        self._text: bytearray | None = None
        self._name = ""
        self._header_bytes = 0
        self._fields = 0
        self.ended = False  # the closing boundary (--BOUNDARY--) was read

    def callbacks(self) -> dict[str, Any]:
        return {"on_part_begin": self.part_begin, "on_part_data": self.part_data, "on_part_end": self.part_end,
                "on_header_field": self.header_field, "on_header_value": self.header_value,
                "on_header_end": self.header_end, "on_headers_finished": self.headers_finished, "on_end": self.end}

    def end(self) -> None:
        self.ended = True

    def part_begin(self) -> None:
        self._headers, self._field, self._value, self._header_bytes = {}, b"", b"", 0

    def header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += self._header_part(data, start, end)

    def header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += self._header_part(data, start, end)

    def _header_part(self, data: bytes, start: int, end: int) -> bytes:
        self._header_bytes += end - start
        self._count(end - start)
        if self._header_bytes > MAX_HEADER_BYTES:
            raise BadRequest(f"a multipart part's headers are longer than {MAX_HEADER_BYTES} bytes")
        return data[start:end]

    def header_end(self) -> None:
        # latin-1 keeps the bytes as they came: a UTF-8 file name (RFC 7578 §4.2) is decoded below
        self._headers[self._field.decode("latin-1").lower()] = self._value.decode("latin-1")
        self._field, self._value = b"", b""

    def headers_finished(self) -> None:
        disposition = self._headers.get("content-disposition", "")
        _, options = parse_options_header(disposition)
        self._name = options.get(b"name", b"").decode("utf-8", "replace")
        filename = client_filename(disposition, options.get(b"filename"))
        if filename is not None and self._name in FILE_FIELDS:
            self._open_file(filename)
        else:
            self._fields += 1
            if self._fields > MAX_FIELDS:
                raise BadRequest(f"too many form fields in one upload (limit {MAX_FIELDS})")
            self._text = bytearray()

    def _open_file(self, client_name: str) -> None:
        index = len(self.upload.paths)
        if index >= MAX_FILES:
            raise BadRequest(f"too many files in one upload (limit {MAX_FILES})")
        # a folder's files keep their layout (capture folders pair files by it); each upload part
        # lives under its own numbered root, so equal names never collide
        rel = safe_relpath(client_name)
        path = self.upload.folder / f"{index:04d}" / rel
        if not path.resolve().is_relative_to(self.upload.folder.resolve()):
            raise BadRequest("unsafe file name")
        path.parent.mkdir(parents=True)
        self.upload.paths.append(path)
        self.upload.relpaths.append(rel)
        self._file = path.open("wb")
        self._hash = hashlib.sha256()

    def part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        self._count(len(chunk))  # files, fields and headers all count towards the upload limit
        if self._file is not None:
            self._file.write(chunk)
            self._hash.update(chunk)
        elif self._text is not None:
            self._text += chunk
            if len(self._text) > MAX_FIELD_BYTES:
                raise BadRequest(f"form field {self._name!r} is too long")

    def _count(self, n: int) -> None:
        self.upload.total_bytes += n
        if self.queue_room is not None and self.upload.total_bytes > self.queue_room:
            raise queue_full(self.queue_room)
        if self.upload.total_bytes > self.max_bytes:
            raise TooLarge(f"upload is larger than the limit of {self.max_bytes} bytes",
                           {"limit_bytes": self.max_bytes})

    def part_end(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self.upload.shas.append(self._hash.hexdigest())
        elif self._text is not None:
            self.upload.fields[self._name] = self._text.decode("utf-8", "replace")
            self._text = None

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):  # its last buffer did not fit (a full disk): the upload goes anyway
                self._file.close()
            self._file = None


def client_filename(disposition: str, plain: bytes | None) -> str | None:
    """The part's file name: RFC 5987 `filename*=UTF-8''...` when a client sends it, else the plain
    `filename` (UTF-8 bytes as RFC 7578 says; undecodable bytes replaced, never an error)."""
    extended = _EXTENDED_FILENAME.search(disposition)
    if extended:
        charset = extended.group(1).lower()
        return unquote(extended.group(2), encoding=charset if charset in ("utf-8", "iso-8859-1") else "utf-8",
                       errors="replace")
    return None if plain is None else plain.decode("utf-8", "replace")


def queued_bytes(tmp_dir: Path) -> int:
    """Bytes of the uploads in `tmp_dir` (being received, or waiting for or in their ingest: each is removed after)."""
    total = 0
    for folder in tmp_dir.glob("upload-*"):
        total += _tree_bytes(folder)
    return total


def _tree_bytes(folder: Path) -> int:
    """The bytes of the files under `folder`, which another upload's ingest may remove while it is walked (its
    files, its subfolders or the folder itself vanish: what is gone counts nothing, never an error)."""
    total = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                total += _tree_bytes(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total


def queue_full(room: int) -> ServerBusy:
    return ServerBusy(f"the upload queue is full ({max(room, 0) / 2**20:,.0f} MiB free of Settings.max_queued_bytes): "
                      f"try again in {QUEUE_RETRY_AFTER_S} s", {"retry_after_s": QUEUE_RETRY_AFTER_S})


def _make_folder(folder: Path, tries: int = 3) -> None:
    """mkdir -p that survives its parent being removed between the two mkdirs (a cleanup of the data folder's
    tmp/ leftovers racing an upload): the parent is made again."""
    for attempt in range(tries):
        try:
            folder.mkdir(parents=True)
            return
        except FileNotFoundError:
            if attempt == tries - 1:
                raise


async def receive_upload(request: Request, tmp_dir: Path, max_bytes: int, max_queued_bytes: int | None = None) -> Upload:
    """Stream a multipart/form-data body into a new folder under `tmp_dir`; raises TooLarge/BadRequest, ServerBusy
    (503, Retry-After) when the uploads held there would pass `max_queued_bytes`, DiskFull (507)."""
    ctype, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if ctype != b"multipart/form-data" or not boundary:
        raise BadRequest("expected a multipart/form-data body with one or more `files` parts")
    if len(boundary) > MAX_BOUNDARY:
        raise BadRequest(f"the multipart boundary is longer than {MAX_BOUNDARY} characters (RFC 2046)")
    length = request.headers.get("content-length")
    declared = int(length) if length and length.isdigit() else None
    if declared is not None and declared > max_bytes + MAX_FIELD_BYTES * 4:
        raise TooLarge(f"upload is larger than the limit of {max_bytes} bytes", {"limit_bytes": max_bytes})
    tmp_dir.mkdir(parents=True, exist_ok=True)
    if declared is not None:
        disk = shutil.disk_usage(tmp_dir)
        needed = declared + min(FREE_RESERVE_BYTES, disk.total // FREE_RESERVE_SHARE)
        if needed > disk.free:
            raise disk_full(tmp_dir, needed, "this upload")  # refused before a byte is written
    room = None if max_queued_bytes is None else max_queued_bytes - queued_bytes(tmp_dir)
    if room is not None and (room <= 0 or (declared or 0) > room + MAX_FIELD_BYTES * 4):
        raise queue_full(room)
    upload = Upload(tmp_dir / f"upload-{secrets.token_hex(8)}")
    try:
        _make_folder(upload.folder)
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full(tmp_dir, declared, "this upload") from None
        raise StorageUnavailable(f"cannot make the upload's folder in {tmp_dir}: {exc.strerror or exc}") from None
    sink = _Sink(upload, max_bytes, room)
    parser = MultipartParser(boundary, sink.callbacks())  # type: ignore[arg-type]
    try:
        async for chunk in request.stream():
            parser.write(chunk)
        parser.finalize()
        if not sink.ended:  # python-multipart's finalize() does not check it: a body cut short parses as a shorter one
            raise BadRequest("the multipart body ends before its closing boundary: it was cut short (nothing is kept; "
                             "send it again)")
    except MultipartParseError as exc:
        sink.close()
        upload.discard()
        raise BadRequest(f"malformed multipart body ({exc})") from None
    except ClientDisconnect:  # the client went away mid-body: nothing kept, nobody to answer, no error of ours
        sink.close()
        upload.discard()
        log.info("an upload's client disconnected before the body ended; discarded")
        raise BadRequest("the client disconnected before the upload ended; nothing was kept") from None
    except OSError as exc:
        sink.close()
        upload.discard()
        if is_disk_full(exc):  # said once its files are gone, so the numbers are what is free without them
            raise disk_full(tmp_dir, declared, "this upload") from None
        raise
    except BaseException:
        sink.close()
        upload.discard()
        raise
    sink.close()
    if not upload.paths:
        upload.discard()
        raise BadRequest("the upload holds no files: send them as multipart parts named `files`")
    return upload
