"""Turn what a user hands us (files, folders, .gz, .zip, .tar[.gz]) into named byte blobs, safely.

Archives are read member by member into memory, never extracted to disk: a `../` name or a link
cannot write anywhere. Decompression is bounded, so a gzip bomb stops with a clear error.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from explorer.errors import BadTrace, UnsafeArchive
from explorer.model.artifacts import Artifact

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
DEFAULT_MAX_BYTES = 8 * 2**30
# A decompression bomb is refused as soon as it is evident, not after writing gigabytes: past
# BOMB_CHECK_BYTES of output, more than MAX_RATIO output bytes per compressed byte read (real traces
# compress 5-30x; a stream of whitespace or one repeated byte, 1000x), or output that is still
# nothing but whitespace (no trace can be read from it), ends the decompression with a clear error.
MAX_RATIO = 200
BOMB_CHECK_BYTES = 64 * 2**20



class Member:
    """One logical input file: its display name (path inside folders/archives) and its bytes,
    held in memory (small, made in code) or in a file (inputs, decompressed members)."""

    def __init__(self, name: str, data: bytes | None = None, path: Path | None = None) -> None:
        if (data is None) == (path is None):
            raise ValueError("a member has either data or a path")
        self.name = name
        self._data = data
        self.path = path

    @property
    def data(self) -> bytes:
        if self._data is not None:
            return self._data
        assert self.path is not None
        return self.path.read_bytes()

    @property
    def size(self) -> int:
        return len(self._data) if self._data is not None else self.path.stat().st_size  # type: ignore[union-attr]

    def head(self, n: int = 65536) -> bytes:
        if self._data is not None:
            return self._data[:n]
        assert self.path is not None
        with self.path.open("rb") as f:
            return f.read(n)

    def __repr__(self) -> str:
        return f"Member({self.name!r}, {self.size} bytes)"


@dataclass
class Inputs:
    members: list[Member] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    scratch: Path | None = None  # where decompressed members live; removed by cleanup()
    hashing: list[Future[str]] = field(default_factory=list)  # per artifact: its sha256, being computed

    def hashes(self) -> list[str]:
        """Each artifact's sha256 (filled in on the artifact too), waiting for the hashing thread."""
        for art, pending in zip(self.artifacts, self.hashing, strict=True):
            art.sha256 = pending.result()
        return [a.sha256 for a in self.artifacts]

    def cleanup(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


HASH_CHUNK_BYTES = 1 << 20


def sha256_file(path: Path) -> str:
    """The file's sha256, read into one buffer over and over: a new 1 MiB chunk per read came from the heap's
    top, which gives it back when freed, so every chunk's pages were zeroed and faulted in anew (54k page faults
    of the 1M-event file's 245k)."""
    h = hashlib.sha256()
    buf = bytearray(HASH_CHUNK_BYTES)
    view = memoryview(buf)
    with path.open("rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


_HASHING = threading.BoundedSemaphore(2)  # files hashed at once (a folder of many files: not a thread storm)


def hash_beside(path: Path) -> Future[str]:
    """The file's sha256, computed on a thread beside the parse (hashlib releases the GIL on big updates),
    so the hash adds no pass of its own to the ingest's time. A daemon thread: an interrupted ingest exits
    at once instead of waiting for the hash of a big file."""
    pending: Future[str] = Future()

    def run() -> None:
        try:
            with _HASHING:
                pending.set_result(sha256_file(path))
        except BaseException as exc:
            pending.set_exception(exc)

    threading.Thread(target=run, name=f"hash-{path.name}", daemon=True).start()
    return pending


def collect_inputs(paths: list[Path], max_bytes: int = DEFAULT_MAX_BYTES, scratch_root: Path | None = None) -> Inputs:
    """Every input path as members (decompressed, file-backed) and artifacts (as given).

    Compressed files and archive members are streamed into a scratch folder under `scratch_root`
    (bounded by max_bytes each); plain files are used in place, never copied."""
    scratch = Path(tempfile.mkdtemp(prefix="ingest-", dir=scratch_root))
    out = Inputs(scratch=scratch)
    try:
        for file, name, is_link in iter_input_files(paths):
            if is_link:
                out.skipped.append((name, "symbolic link (not followed)"))
            else:
                _add_file(file, name, out, max_bytes)
    except BaseException:
        out.cleanup()
        raise
    return out


def iter_input_files(paths: list[Path]) -> Iterator[tuple[Path, str, bool]]:
    """(file, display name, is a link) for every file the input paths name: folders walked in name order,
    a symbolic link inside one reported (and never followed). The artifacts of a run are these files."""
    for path in paths:
        if not path.exists():
            raise BadTrace(str(path), "no such file or folder")
        if not path.is_dir():
            yield path, path.name, False
            continue
        files = [f for f in sorted(path.rglob("*")) if f.is_symlink() or f.is_file()]
        if not files:
            raise BadTrace(str(path), "the folder has no files (point at the folder the profiler wrote into)")
        for file in files:
            yield file, file.relative_to(path.parent).as_posix(), file.is_symlink()


def _add_file(path: Path, name: str, out: Inputs, max_bytes: int) -> None:
    size = path.stat().st_size
    out.artifacts.append(Artifact(path, name, size, ""))  # sha256 from Inputs.hashes()
    out.hashing.append(hash_beside(path))
    if size > max_bytes:
        raise BadTrace(name, f"file is {size} bytes, over the limit of {max_bytes}")
    out.members.extend(unwrap(Member(name, path=path), max_bytes, out))


def _scratch_file(out: Inputs) -> Path:
    assert out.scratch is not None
    fd, name = tempfile.mkstemp(dir=out.scratch, suffix=".part")
    os.close(fd)
    return Path(name)


def unwrap(member: Member, max_bytes: int, out: Inputs) -> Iterator[Member]:
    """Unwrap gzip / zip / tar layers; yield the plain files inside (file-backed)."""
    head = member.head(512)
    if head.startswith(GZIP_MAGIC):
        target = _scratch_file(out)
        with _open_member(member) as src, target.open("wb") as dst:
            gunzip_stream(src, dst, member.name, max_bytes)
        inner_name = member.name[:-3] if member.name.endswith(".gz") else member.name
        yield from unwrap(Member(inner_name, path=target), max_bytes, out)
    elif head.startswith(ZIP_MAGIC):
        yield from _iter_zip(member, max_bytes, out)
    elif _is_tar(head):
        yield from _iter_tar(member, max_bytes, out)
    else:
        yield member


def _open_member(member: Member) -> BinaryIO:
    if member.path is not None:
        return member.path.open("rb")
    return io.BytesIO(member.data)


def iter_blob(name: str, data: bytes, max_bytes: int, skipped: list[tuple[str, str]]) -> Iterator[Member]:
    """In-memory variant for callers holding bytes: members come back file-backed in a scratch
    folder that lives until the process ends (tests, tools)."""
    out = Inputs(scratch=Path(tempfile.mkdtemp(prefix="blob-")))
    yield from unwrap(Member(name, data=data), max_bytes, out)
    skipped.extend(out.skipped)


class _OutputGuard:
    """Counts what a decompression wrote and refuses it once it is over the limit, a bomb by ratio,
    or evidently empty (see MAX_RATIO)."""

    def __init__(self, name: str, max_bytes: int) -> None:
        self.name, self.max_bytes = name, max_bytes
        self.compressed = 0
        self.total = 0
        self.blank = True

    def wrote(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.total > self.max_bytes:
            raise BadTrace(self.name, f"decompresses to more than {self.max_bytes} bytes (limit); refusing")
        self.blank = self.blank and not chunk.strip()
        if self.total > BOMB_CHECK_BYTES:
            if self.blank:
                raise BadTrace(self.name, f"the first {self.total} decompressed bytes are all whitespace; refusing")
            if self.compressed and self.total > MAX_RATIO * self.compressed:
                raise BadTrace(self.name, f"decompresses more than {MAX_RATIO}x ({self.total} bytes from "
                                          f"{self.compressed}): refused as a decompression bomb")


def gunzip_stream(src: BinaryIO, dst: BinaryIO, name: str, max_bytes: int) -> int:
    """Decompress (possibly concatenated) gzip from src to dst, refusing more than max_bytes (and bombs)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    guard = _OutputGuard(name, max_bytes)
    trailing = False
    try:
        while not trailing:
            buf = src.read(1 << 20)
            if not buf:
                break
            guard.compressed += len(buf)
            while buf:
                if d.eof:
                    if not buf.startswith(GZIP_MAGIC):
                        trailing = True  # padding after the last member: ignore it
                        break
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                chunk = d.decompress(buf, 1 << 22)
                guard.wrote(chunk)
                dst.write(chunk)
                buf = d.unused_data if d.eof else d.unconsumed_tail
    except zlib.error as exc:
        raise BadTrace(name, f"corrupt gzip data ({exc})") from None
    if not d.eof:
        raise BadTrace(name, "truncated gzip data: the compressed stream ends early")
    return guard.total


def gunzip_bounded(data: bytes, name: str, max_bytes: int) -> bytes:
    out = io.BytesIO()
    gunzip_stream(io.BytesIO(data), out, name, max_bytes)
    return out.getvalue()


def _is_tar(head: bytes) -> bool:
    return len(head) > 262 and head[257:262] == b"ustar"


def _safe_member_name(archive: str, member: str) -> str:
    p = PurePosixPath(member.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or member.startswith("/"):
        raise UnsafeArchive(archive, f"member {member!r} has an absolute or '..' path")
    return f"{archive}/{p.as_posix()}"


def _copy_bounded(src: IO[bytes], target: Path, name: str, max_bytes: int, compressed: int = 0) -> None:
    """Copy an archive member out, with the guard of gunzip_stream (`compressed`: its stored size)."""
    guard = _OutputGuard(name, max_bytes)
    guard.compressed = compressed
    with target.open("wb") as dst:
        while chunk := src.read(1 << 20):
            guard.wrote(chunk)
            dst.write(chunk)


@dataclass
class _Entry:
    """An archive entry, whatever the archive kind: its name, what it is, and how to read it."""

    name: str
    kind: str  # file | dir | link
    open: Callable[[], IO[bytes] | None]
    stored: int = 0  # compressed size in the archive (zip), 0 when not compressed on its own (tar)


def _iter_zip(member: Member, max_bytes: int, out: Inputs) -> Iterator[Member]:
    with _open_member(member) as fh:
        try:
            zf = zipfile.ZipFile(fh)
            infos = zf.infolist()
        except zipfile.BadZipFile as exc:
            raise BadTrace(member.name, f"corrupt zip archive ({exc})") from None
        with zf:
            entries = (_Entry(i.filename, "dir" if i.is_dir() else "link" if stat.S_ISLNK(i.external_attr >> 16)
                              else "file", partial(zf.open, i), i.compress_size) for i in infos)
            yield from _extract(entries, member, max_bytes, out)


def _iter_tar(member: Member, max_bytes: int, out: Inputs) -> Iterator[Member]:
    with _open_member(member) as fh:
        try:
            tf = tarfile.open(fileobj=fh, mode="r:")  # noqa: SIM115 - closed just below
            infos = tf.getmembers()
        except tarfile.TarError as exc:
            raise BadTrace(member.name, f"corrupt tar archive ({exc})") from None
        with tf:
            entries = (_Entry(m.name, "dir" if m.isdir() else "file" if m.isfile() else "link",
                              partial(tf.extractfile, m)) for m in infos)
            yield from _extract(entries, member, max_bytes, out)


def _extract(entries: Iterator[_Entry], archive: Member, max_bytes: int, out: Inputs) -> Iterator[Member]:
    """Copy each regular file entry (bounded) into scratch; skip and note unsafe names and links."""
    for entry in entries:
        if entry.kind == "dir":
            continue
        try:
            member_name = _safe_member_name(archive.name, entry.name)
        except UnsafeArchive as exc:
            out.skipped.append((entry.name, exc.problem))
            continue
        if entry.kind == "link":
            out.skipped.append((member_name, "link or special file inside the archive (not followed)"))
            continue
        target = _scratch_file(out)
        try:
            f = entry.open()
            if f is None:
                continue
            with f:
                _copy_bounded(f, target, member_name, max_bytes, entry.stored)
        except (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError) as exc:
            raise BadTrace(member_name, f"corrupt archive member ({exc})") from None
        yield from unwrap(Member(member_name, path=target), max_bytes, out)


def open_maybe_gzip(path: Path) -> bytes:
    """Small helper for tools and tests: a file's bytes, gunzipped when compressed."""
    with path.open("rb") as f:
        head = f.read(2)
    if head == GZIP_MAGIC:
        with gzip.open(path, "rb") as g:
            return g.read()
    return path.read_bytes()
