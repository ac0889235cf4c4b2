"""Where runs' files live: a folder (local or mounted) or S3-compatible object storage, behind one small
interface of keys ("runs/<id>/<attempt>") and local folders, file by file, never a whole run in memory.
Nothing here knows about the catalog. Who owns which keys: docs/architecture.md, "store/storage.py"."""

from __future__ import annotations

import builtins
import functools
import logging
import os
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from explorer.errors import ExplorerError, StorageUnavailable, require_extra

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

log = logging.getLogger(__name__)


def _check_key(key: str) -> str:
    """A relative, normalised key: no leading '/', no '..', no empty parts (keys come from our code, but a
    key that escaped the root would delete someone else's files)."""
    parts = PurePosixPath(key).parts
    if not parts or key.startswith("/") or any(p in ("..", ".") for p in parts):
        raise ValueError(f"storage key {key!r} is not a relative path under the storage root")
    return "/".join(parts)


class Storage(ABC):
    """Files under one root, addressed by relative keys with '/' separators.

    A key names a file or a folder (a "tree"). Writes are not atomic by themselves: a run becomes
    visible when the catalog records its key (RunStore.save), so a half-written key is only ever an
    unreferenced one, which RunStore.sweep removes."""

    url: str  # the storage as the user gave it, for messages
    # True: each publication of a run goes to a fresh key runs/<id>/<attempt> (object storage, where no
    # rename is atomic); False: to runs/<id> by one atomic rename (a folder, the layout data folders have)
    attempts: bool = False

    @property
    @abstractmethod
    def fs(self) -> AbstractFileSystem:
        """The fsspec filesystem, for reads in place (DuckDB's register_filesystem, pyarrow)."""

    @abstractmethod
    def path(self, key: str) -> str:
        """The key's full path on `fs` (a local path, or bucket/prefix/key for S3)."""

    @abstractmethod
    def url_of(self, key: str) -> str:
        """The key as a URL DuckDB can open once `duckdb_filesystem()` is registered (a plain local path for
        a folder)."""

    def duckdb_filesystem(self) -> AbstractFileSystem | None:
        """What to pass to DuckDB's `register_filesystem` so it reads `url_of` keys; None: DuckDB reads them
        natively (local files)."""
        return None

    def local_path(self, key: str) -> Path | None:
        """The key as a local path when the storage is a folder (read in place, no copy); None for remote
        storage (fetch it with get_tree)."""
        return None

    def put_tree(self, local_dir: Path, key: str) -> None:
        """Upload every file under `local_dir` to `key/<relative path>`, one file at a time, streamed."""
        key = _check_key(key)
        for src in sorted(local_dir.rglob("*")):
            if src.is_file():
                self.fs.put_file(str(src), self.path(f"{key}/{src.relative_to(local_dir).as_posix()}"))

    def get_tree(self, key: str, local_dir: Path, exclude: tuple[str, ...] = ()) -> None:
        """Download every file under `key` into `local_dir` (made if missing), streamed one file at a time;
        `exclude`: top-level names under the key to skip (e.g. "artifacts")."""
        for rel in self.list_files(key):
            if rel.split("/", 1)[0] in exclude:
                continue
            dest = local_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(self.path(f"{_check_key(key)}/{rel}"), str(dest))

    def put_file(self, local: Path, key: str) -> None:
        self.fs.put_file(str(local), self.path(_check_key(key)))

    def get_file(self, key: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        self.fs.get_file(self.path(_check_key(key)), str(local))

    def exists(self, key: str) -> bool:
        """A file or a non-empty folder at `key`."""
        return bool(self.fs.exists(self.path(_check_key(key))))

    def list(self, key: str) -> builtins.list[str]:
        """Names directly under the folder `key` (files and folders), sorted; [] when there is none."""
        try:
            entries = self.fs.ls(self.path(_check_key(key)), detail=False)
        except FileNotFoundError:
            return []
        return sorted({PurePosixPath(str(e)).name for e in entries})

    def list_files(self, key: str) -> builtins.list[str]:
        """Every file under the folder `key`, as paths relative to it, sorted."""
        root = self.path(_check_key(key)).rstrip("/")
        try:
            found = self.fs.find(root)
        except FileNotFoundError:
            return []
        return sorted(str(f)[len(root) + 1:] for f in found if str(f).startswith(root + "/"))

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the file or the whole tree at `key`; nothing there is fine."""

    @abstractmethod
    def publish(self, local_dir: Path, key: str) -> None:
        """Move a finished local folder (written under `staging_dir()`) to `key`; `local_dir` is gone after."""

    @abstractmethod
    def staging_dir(self, default: Path) -> Path:
        """Where a run is written before `publish`: beside the runs for a folder (so publishing is one
        rename on the same filesystem), else `default` (the local data folder's tmp/)."""


class FolderStorage(Storage):
    """A folder: `<root>/runs/<id>/` as the data folder always had it. Publishing is one rename."""

    def __init__(self, root: Path, url: str = "") -> None:
        self.root = root
        self.url = url or str(root)

    @functools.cached_property
    def fs(self) -> AbstractFileSystem:  # (fsspec imported when first asked for: an ingest does without it)
        from fsspec.implementations.local import LocalFileSystem

        return LocalFileSystem()

    def path(self, key: str) -> str:
        return str(self.root / _check_key(key))

    def url_of(self, key: str) -> str:
        return self.path(key)

    def local_path(self, key: str) -> Path | None:
        return self.root / _check_key(key)

    def put_tree(self, local_dir: Path, key: str) -> None:
        shutil.copytree(local_dir, self.root / _check_key(key), dirs_exist_ok=True)

    def get_tree(self, key: str, local_dir: Path, exclude: tuple[str, ...] = ()) -> None:
        shutil.copytree(self.root / _check_key(key), local_dir, dirs_exist_ok=True,
                        ignore=lambda folder, names: [n for n in names if n in exclude and
                                                      Path(folder) == self.root / _check_key(key)])

    def delete(self, key: str) -> None:
        target = self.root / _check_key(key)
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)

    def publish(self, local_dir: Path, key: str) -> None:
        target = self.root / _check_key(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        for f in local_dir.rglob("*"):  # durable before it is visible: a crash never shows a torn file
            if f.is_file():
                with f.open("rb") as fh:
                    os.fsync(fh.fileno())
        os.replace(local_dir, target)

    def staging_dir(self, default: Path) -> Path:
        return self.root / "tmp"


class S3Storage(Storage):
    """`s3://bucket/prefix` through s3fs. Endpoint and region come from Settings (the AWS_ENDPOINT_URL_S3 /
    AWS_ENDPOINT_URL and AWS_REGION / AWS_DEFAULT_REGION variables); credentials from botocore's own chain
    (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE, an instance or pod role)."""

    def __init__(self, url: str, endpoint_url: str = "", region: str = "",
                 options: dict[str, Any] | None = None) -> None:
        require_extra("s3fs", "S3 run storage (--storage s3://...)")
        import s3fs  # the S3 client stack is loaded only by servers that use S3

        parsed = urlparse(url)
        if not parsed.netloc:
            raise StorageUnavailable(f"storage URL {url!r} names no bucket (s3://bucket/prefix)")
        self.url = url
        self.attempts = True
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        client_kwargs: dict[str, Any] = {}
        if region:
            client_kwargs["region_name"] = region
        self._fs: AbstractFileSystem = s3fs.S3FileSystem(
            endpoint_url=endpoint_url or None, client_kwargs=client_kwargs,
            # new objects must be listed at once by the sweep and by other replicas: no listing cache
            use_listings_cache=False, skip_instance_cache=True, **(options or {}))

    @property
    def fs(self) -> AbstractFileSystem:
        return self._fs

    def path(self, key: str) -> str:
        return "/".join(p for p in (self.bucket, self.prefix, _check_key(key)) if p)

    def url_of(self, key: str) -> str:
        return f"s3://{self.path(key)}"

    def duckdb_filesystem(self) -> AbstractFileSystem | None:
        return self._fs

    def delete(self, key: str) -> None:
        path = self.path(_check_key(key))
        files = self.list_files(key)
        if files:
            self._fs.rm([f"{path}/{f}" for f in files])
        elif self._fs.exists(path):
            self._fs.rm(path)
        self._fs.invalidate_cache()

    def publish(self, local_dir: Path, key: str) -> None:
        self.put_tree(local_dir, key)
        shutil.rmtree(local_dir, ignore_errors=True)

    def staging_dir(self, default: Path) -> Path:
        return default


def open_storage(url: str, data_dir: Path, *, endpoint_url: str = "", region: str = "") -> Storage:
    """The storage a `--storage` URL names: empty for the data folder itself (as before storage could be
    elsewhere), a path or file:// URL for a folder, s3://bucket/prefix for S3."""
    if not url:
        return FolderStorage(data_dir)
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        return S3Storage(url, endpoint_url, region)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise StorageUnavailable(f"storage URL {url!r}: a file:// URL names a local or mounted folder "
                             "(file:///mnt/fsx/explorer), not a host")
        return FolderStorage(Path(parsed.path), url)
    if parsed.scheme == "":
        return FolderStorage(Path(url), url)
    raise StorageUnavailable(f"storage URL scheme {parsed.scheme!r} is not supported (a folder, file:///path or "
                     "s3://bucket/prefix)")


@contextmanager
def answering(storage: Storage, what: str) -> Iterator[None]:
    """Errors of the storage (network, credentials, permissions) as StorageUnavailable naming the storage
    and what we were doing, in one line; a missing file stays FileNotFoundError for callers that expect it."""
    try:
        yield
    except (ExplorerError, FileNotFoundError):
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StorageUnavailable(f"the run storage {storage.url} is not answering ({what}): {first}") from exc


def new_attempt() -> str:
    """A unique name for one publication of a run: two attempts never write the same key."""
    return "a" + uuid.uuid4().hex[:12]
