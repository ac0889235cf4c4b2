"""This machine's copies of runs kept on object storage: a cache only, bounded on disk, filled whole by one
rename; past the bound the least recently read copies go, never one read within KEEP_S nor the one just
filled. Which copies are current is the catalog's to say (RunStore)."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

KEEP_S = 120.0  # a copy read this recently is never dropped for space
PART_STALE_S = 3600.0  # a fill this old was left by a process that died


class RunCopies:
    """Local copies of runs under `root`, filled by `fetch(location, into)`, at most `max_bytes` together."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._fill_locks: dict[str, threading.Lock] = {}  # one fill at a time per run (others' go on)
        self._read_at: dict[str, float] = {}  # location -> last read in this process (monotonic)

    def get(self, location: str, fetch: Callable[[Path], None]) -> Path:
        """The local copy of the run stored at `location`, filled with `fetch(folder)` when missing."""
        local = self.root / location
        self._read_at[location] = time.monotonic()
        if local.is_dir():
            return local
        with self._lock:
            lock = self._fill_locks.setdefault(location, threading.Lock())
        with lock:
            if local.is_dir():
                return local
            part = self.root / "parts" / uuid.uuid4().hex
            part.mkdir(parents=True)
            try:
                fetch(part)
                local.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.replace(part, local)
                except OSError:
                    if not local.is_dir():  # not another process's fill that got there first
                        raise
            finally:
                shutil.rmtree(part, ignore_errors=True)
        self._read_at[location] = time.monotonic()
        self.trim()
        return local

    def trim(self) -> list[str]:
        """Drop the least recently read copies until the rest fit `max_bytes`; returns their locations."""
        copies = [(loc, path, _size(path)) for loc, path in self._copies()]
        total = sum(size for _, _, size in copies)
        if total <= self.max_bytes:
            return []
        now = time.monotonic()

        def last_read(item: tuple[str, Path, int]) -> float:
            loc, path, _ = item
            return self._read_at.get(loc, now - KEEP_S - (time.time() - path.stat().st_mtime))

        dropped = []
        for loc, path, size in sorted(copies, key=last_read):
            if total <= self.max_bytes:
                break
            if now - self._read_at.get(loc, float("-inf")) < KEEP_S:
                continue
            shutil.rmtree(path, ignore_errors=True)
            self._read_at.pop(loc, None)
            total -= size
            dropped.append(loc)
        return dropped

    def keep_only(self, current: set[str]) -> None:
        """Drop every copy whose location is not in `current` (the ready runs' locations, from the catalog)."""
        runs = self.root / "runs"
        for run in runs.iterdir() if runs.is_dir() else []:
            if f"runs/{run.name}" in current:  # a run stored before locations were recorded: the folder is it
                continue
            for attempt in list(run.iterdir()):
                if f"runs/{run.name}/{attempt.name}" not in current:
                    shutil.rmtree(attempt, ignore_errors=True)
            if not any(run.iterdir()):
                shutil.rmtree(run, ignore_errors=True)
        self._read_at = {loc: t for loc, t in self._read_at.items() if loc in current}

    def sweep_parts(self) -> None:
        """Remove fills left by processes that died (older than PART_STALE_S)."""
        parts = self.root / "parts"
        if parts.is_dir():
            for leftover in parts.iterdir():
                if time.time() - leftover.stat().st_mtime > PART_STALE_S:
                    shutil.rmtree(leftover, ignore_errors=True)

    def _copies(self) -> list[tuple[str, Path]]:
        """(location, folder) of every copy: `runs/<id>/<attempt>` folders holding run.json."""
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        return [(f"runs/{r.name}/{a.name}", a) for r in runs.iterdir() if r.is_dir()
                for a in r.iterdir() if (a / "run.json").is_file()]


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
