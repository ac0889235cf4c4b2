"""Turn what a user hands us (files, folders, .gz, .zip, .tar[.gz]) into named byte blobs, safely.

Archives are read member by member into memory, never extracted to disk: a `../` name or a link
cannot write anywhere. Decompression is bounded, so a gzip bomb stops with a clear error.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from explorer.errors import BadTrace, UnsafeArchive

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
DEFAULT_MAX_BYTES = 8 * 2**30


@dataclass
class Member:
    """One logical input file: its display name (path inside folders/archives) and its bytes."""

    name: str
    data: bytes


@dataclass
class Artifact:
    """A file the user gave us, kept with the run as it came."""

    path: Path
    name: str
    size: int
    sha256: str


@dataclass
class Inputs:
    members: list[Member] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def collect_inputs(paths: list[Path], max_bytes: int = DEFAULT_MAX_BYTES) -> Inputs:
    """Read every input path into members (decompressed) and artifacts (as given)."""
    out = Inputs()
    for path in paths:
        if not path.exists():
            raise BadTrace(str(path), "no such file or folder")
        if path.is_dir():
            for file in sorted(p for p in path.rglob("*")):
                rel = file.relative_to(path.parent).as_posix()
                if file.is_symlink():
                    out.skipped.append((rel, "symbolic link (not followed)"))
                    continue
                if file.is_file():
                    _add_file(file, rel, out, max_bytes)
        else:
            _add_file(path, path.name, out, max_bytes)
    return out


def _add_file(path: Path, name: str, out: Inputs, max_bytes: int) -> None:
    size = path.stat().st_size
    out.artifacts.append(Artifact(path, name, size, sha256_file(path)))
    if size > max_bytes:
        raise BadTrace(name, f"file is {size} bytes, over the limit of {max_bytes}")
    data = path.read_bytes()
    out.members.extend(iter_blob(name, data, max_bytes, out.skipped))


def iter_blob(name: str, data: bytes, max_bytes: int, skipped: list[tuple[str, str]]) -> Iterator[Member]:
    """Unwrap gzip / zip / tar layers; yield the plain files inside."""
    if data.startswith(GZIP_MAGIC):
        inner = gunzip_bounded(data, name, max_bytes)
        inner_name = name[:-3] if name.endswith(".gz") else name
        yield from iter_blob(inner_name, inner, max_bytes, skipped)
    elif data.startswith(ZIP_MAGIC):
        yield from _iter_zip(name, data, max_bytes, skipped)
    elif _is_tar(data):
        yield from _iter_tar(name, data, max_bytes, skipped)
    else:
        yield Member(name, data)


def gunzip_bounded(data: bytes, name: str, max_bytes: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    parts: list[bytes] = []
    total = 0
    buf = data
    try:
        while buf:
            chunk = d.decompress(buf, 1 << 24)
            total += len(chunk)
            if total > max_bytes:
                raise BadTrace(name, f"decompresses to more than {max_bytes} bytes (limit); refusing")
            parts.append(chunk)
            buf = d.unconsumed_tail
            if d.eof:
                rest = d.unused_data
                if rest.startswith(GZIP_MAGIC):  # concatenated gzip members
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    buf = rest
                else:
                    buf = b""
        if not d.eof:
            raise BadTrace(name, "truncated gzip data: the compressed stream ends early")
    except zlib.error as exc:
        raise BadTrace(name, f"corrupt gzip data ({exc})") from None
    return b"".join(parts)


def _is_tar(data: bytes) -> bool:
    return len(data) > 262 and data[257:262] == b"ustar"


def _safe_member_name(archive: str, member: str) -> str:
    p = PurePosixPath(member.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or member.startswith("/"):
        raise UnsafeArchive(archive, f"member {member!r} has an absolute or '..' path")
    return f"{archive}/{p.as_posix()}"


def _iter_zip(name: str, data: bytes, max_bytes: int, skipped: list[tuple[str, str]]) -> Iterator[Member]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except zipfile.BadZipFile as exc:
        raise BadTrace(name, f"corrupt zip archive ({exc})") from None
    for info in infos:
        if info.is_dir():
            continue
        try:
            member_name = _safe_member_name(name, info.filename)
        except UnsafeArchive as exc:
            skipped.append((info.filename, exc.problem))
            continue
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            skipped.append((member_name, "symbolic link inside the archive (not followed)"))
            continue
        if info.file_size > max_bytes:
            raise BadTrace(member_name, f"decompresses to {info.file_size} bytes, over the limit")
        with zf.open(info) as f:
            blob = f.read(max_bytes + 1)
        if len(blob) > max_bytes:
            raise BadTrace(member_name, "decompresses to more than the limit; refusing")
        yield from iter_blob(member_name, blob, max_bytes, skipped)


def _iter_tar(name: str, data: bytes, max_bytes: int, skipped: list[tuple[str, str]]) -> Iterator[Member]:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = tf.getmembers()
    except tarfile.TarError as exc:
        raise BadTrace(name, f"corrupt tar archive ({exc})") from None
    for m in members:
        if m.isdir():
            continue
        try:
            member_name = _safe_member_name(name, m.name)
        except UnsafeArchive as exc:
            skipped.append((m.name, exc.problem))
            continue
        if m.issym() or m.islnk() or not m.isfile():
            skipped.append((member_name, "link or special file inside the archive (not followed)"))
            continue
        if m.size > max_bytes:
            raise BadTrace(member_name, f"is {m.size} bytes, over the limit")
        f = tf.extractfile(m)
        if f is None:
            continue
        yield from iter_blob(member_name, f.read(), max_bytes, skipped)


def open_maybe_gzip(path: Path) -> bytes:
    """Small helper for tools and tests: a file's bytes, gunzipped when compressed."""
    with path.open("rb") as f:
        head = f.read(2)
    if head == GZIP_MAGIC:
        with gzip.open(path, "rb") as g:
            return g.read()
    return path.read_bytes()


def is_within(base: Path, target: Path) -> bool:
    return os.path.commonpath([base.resolve(), target.resolve()]) == str(base.resolve())
