"""Where an upload and the parts of its run travel between the web process and the queue workers, through the
run storage under `queue/<run id>/...`: moved by one rename on a shared folder, file by file on S3 (a local
copy a job drops, `forget_local`). Nothing here knows what the trees hold. Keys: docs/architecture.md,
"runs/jobs/shared.py"."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from explorer.store.storage import Storage

PREFIX = "queue"


class SharedFiles:
    """Trees of files under keys, readable by every machine running the web process or a worker."""

    def __init__(self, storage: Storage, local_root: Path) -> None:
        self.storage = storage
        self.local_root = local_root  # this machine's copies of remote trees (object storage only)
        self._in_place = storage.local_path(PREFIX)

    def put(self, local: Path, key: str) -> None:
        """Move the finished tree `local` under `key` (replacing one there): after this, every machine can
        get it, and `local` is gone. A folder: a rename when it is on the same filesystem (a reader never sees
        half a tree), else a copy; object storage: an upload of each file (a reader is told of the tree only
        after this returns: by the queue)."""
        if self._in_place is None:
            self.storage.delete(self._key(key))  # a retried job's second copy: the newest wins
            self.storage.put_tree(local, self._key(key))
            shutil.rmtree(local, ignore_errors=True)
            return
        target = self._in_place.joinpath(*self._parts(key))
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        try:
            os.replace(local, target)
        except OSError:  # another filesystem: copy, then drop the original
            shutil.copytree(local, target)
            shutil.rmtree(local, ignore_errors=True)

    def get(self, key: str) -> Path:
        """A local folder holding the tree under `key` (a folder: the tree itself, read in place; object
        storage: this machine's copy, downloaded once); FileNotFoundError when there is none (yet: a transient
        error, the job is retried)."""
        if self._in_place is not None:
            path = self._in_place.joinpath(*self._parts(key))
            if not path.is_dir():
                raise FileNotFoundError(f"shared files {key!r} are missing from {self.storage.url}")
            return path
        local = self.local_root.joinpath(*self._parts(key))
        if local.is_dir():
            return local
        if not self.storage.exists(self._key(key)):
            raise FileNotFoundError(f"shared files {key!r} are missing from {self.storage.url}")
        local.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".get-", dir=local.parent))
        try:
            self.storage.get_tree(self._key(key), work)
            os.replace(work, local)  # whole or not at all: a killed download leaves only .get-*
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return local

    def file(self, key: str, rel: str) -> Path:
        """One file of the tree under `key` as a local path (object storage: only that file is downloaded)."""
        if self._in_place is not None:
            return self.get(key) / rel
        local = self.local_root.joinpath(*self._parts(key), *self._parts(rel))
        if not local.is_file():
            if not self.storage.exists(f"{self._key(key)}/{rel}"):
                raise FileNotFoundError(f"shared file {key}/{rel} is missing from {self.storage.url}")
            local.parent.mkdir(parents=True, exist_ok=True)
            part = local.with_name(f".{local.name}.get-{os.getpid()}")
            self.storage.get_file(f"{self._key(key)}/{rel}", part)
            os.replace(part, local)
        return local

    def delete(self, key: str) -> None:
        """Remove the tree under `key` and everything below it, everywhere (and this machine's copy)."""
        self.storage.delete(self._key(key))
        self.forget_local(key)

    def forget_local(self, key: str) -> None:
        """Drop this machine's copy of the tree under `key` (object storage; nothing to do for a folder)."""
        if self._in_place is None:
            shutil.rmtree(self.local_root.joinpath(*self._parts(key)), ignore_errors=True)

    def runs(self) -> list[str]:
        """The run ids that have shared files (for the sweep of what no queued run needs any more)."""
        return self.storage.list(PREFIX)

    @staticmethod
    def _parts(key: str) -> list[str]:
        return [p for p in key.split("/") if p not in ("", ".", "..")]

    def _key(self, key: str) -> str:
        return "/".join([PREFIX, *self._parts(key)])
