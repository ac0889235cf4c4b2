"""Where an upload and the parts of its run travel between the web process and the queue workers: the one
place that moves those files. Today a folder every machine mounts (the data folder's tmp/queue); a storage
layer (S3) plugs in here, as put_tree/get_tree/delete, and nothing else changes.

Keys are `<run id>/<what>`: `upload` (the files as received), `inputs` (members the first job decompressed),
`parts/<member index>` (one parse job's output). Nothing here knows what the trees hold.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class SharedFiles:
    """Trees of files under keys, readable by every machine running the web process or a worker."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, local: Path, key: str) -> None:
        """Move the finished tree `local` under `key` (replacing one there): after this, every machine can
        get it. A shared folder: a rename (the tree is already on it), so a reader never sees half a tree."""
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():  # a retried job's second copy: the newest wins
            shutil.rmtree(target)
        try:
            os.replace(local, target)
        except OSError:  # another filesystem: copy, then drop the original
            shutil.copytree(local, target)
            shutil.rmtree(local, ignore_errors=True)

    def get(self, key: str) -> Path:
        """A local folder holding the tree under `key` (a shared folder: the tree itself, read in place);
        FileNotFoundError when there is none (yet: a transient error, the job is retried)."""
        path = self._path(key)
        if not path.is_dir():
            raise FileNotFoundError(f"shared files {key!r} are missing from {self.root}")
        return path

    def delete(self, key: str) -> None:
        """Remove the tree under `key` and everything below it, if any."""
        shutil.rmtree(self._path(key), ignore_errors=True)

    def _path(self, key: str) -> Path:
        parts = [p for p in key.split("/") if p not in ("", ".", "..")]
        return self.root.joinpath(*parts)
