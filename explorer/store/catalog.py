"""The SQLite catalog: runs, their status and summary, tags and share tokens.

Only metadata lives here; a run's events live in its Parquet folder (see runs.py).
"""

from __future__ import annotations

import builtins
import json
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explorer.errors import RunNotFound
from explorer.model.summary import RunSummary, load_summary

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    status TEXT NOT NULL,          -- queued | ingesting | ready | failed
    progress REAL NOT NULL DEFAULT 0,
    message TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    sha256 TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_sha ON runs(sha256);
CREATE TABLE IF NOT EXISTS tags (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (run_id, tag)
);
CREATE TABLE IF NOT EXISTS leases (   -- who is ingesting a run right now: a live process renews it
    run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS shares (
    token TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    created_at REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
"""

STATUSES = ("queued", "ingesting", "ready", "failed")
# An ingest renews its lease every HEARTBEAT_S; one not renewed for LEASE_S, or whose process is gone from
# this host, is dead, and its run may be marked failed by whoever looks (a server starting, `recover`).
HEARTBEAT_S = 5.0
LEASE_S = 30.0


@dataclass
class RunRecord:
    id: str
    name: str
    status: str
    progress: float
    message: str
    created_at: float
    updated_at: float
    sha256: str
    source: str
    summary: RunSummary
    tags: list[str] = field(default_factory=list)


@dataclass
class ShareRecord:
    token: str
    run_id: str
    created_at: float
    revoked: bool


@dataclass
class Lease:
    run_id: str
    host: str
    pid: int
    heartbeat_at: float

    def alive(self, now: float | None = None) -> bool:
        if (now or time.time()) - self.heartbeat_at > LEASE_S:
            return False
        return self.host != socket.gethostname() or _pid_alive(self.pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def new_run_id() -> str:
    return "r" + secrets.token_hex(6)


class Catalog:
    """Thread-safe access to the catalog database (one connection, serialized)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def create(self, name: str, source: str = "", sha256: str = "", status: str = "queued") -> RunRecord:
        now = time.time()
        run_id = new_run_id()
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs (id, name, status, created_at, updated_at, sha256, source) VALUES (?,?,?,?,?,?,?)",
                (run_id, name, status, now, now, sha256, source),
            )
        return self.get(run_id)

    def update(self, run_id: str, **fields: Any) -> None:
        allowed = {"name", "status", "progress", "message", "sha256", "source", "summary"}
        sets = {k: (_summary_json(v) if k == "summary" else v) for k, v in fields.items() if k in allowed}
        if not sets:
            return
        sets["updated_at"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in sets)
        with self._tx() as db:
            cur = db.execute(f"UPDATE runs SET {cols} WHERE id = ?", (*sets.values(), run_id))
            if cur.rowcount == 0:
                raise RunNotFound(run_id)

    def delete(self, run_id: str) -> None:
        with self._tx() as db:
            cur = db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            if cur.rowcount == 0:
                raise RunNotFound(run_id)

    def get(self, run_id: str) -> RunRecord:
        with self._lock:
            row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise RunNotFound(run_id)
            return self._record(row)

    def find_by_sha(self, sha256: str) -> RunRecord | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM runs WHERE sha256 = ? AND status != 'failed' ORDER BY created_at LIMIT 1", (sha256,)
            ).fetchone()
            return self._record(row) if row else None

    def list(self, name: str | None = None, tag: str | None = None, status: str | None = None,
             limit: int = 100, offset: int = 0) -> tuple[builtins.list[RunRecord], int]:
        where, params = ["1=1"], []
        if name:
            where.append("name LIKE ? ESCAPE '\\'")
            params.append("%" + name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        if tag:
            where.append("id IN (SELECT run_id FROM tags WHERE tag = ?)")
            params.append(tag)
        if status:
            where.append("status = ?")
            params.append(status)
        clause = " AND ".join(where)
        with self._lock:
            total = self._db.execute(f"SELECT count(*) FROM runs WHERE {clause}", params).fetchone()[0]
            rows = self._db.execute(
                f"SELECT * FROM runs WHERE {clause} ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
            return [self._record(r) for r in rows], int(total)

    def set_tags(self, run_id: str, tags: builtins.list[str]) -> None:
        self.get(run_id)
        with self._tx() as db:
            db.execute("DELETE FROM tags WHERE run_id = ?", (run_id,))
            db.executemany("INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)", [(run_id, t) for t in tags])

    def unfinished(self) -> builtins.list[RunRecord]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM runs WHERE status IN ('queued', 'ingesting')").fetchall()
            return [self._record(r) for r in rows]

    # ---- ingest leases ------------------------------------------------------------------------

    def take_lease(self, run_id: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO leases (run_id, host, pid, heartbeat_at) VALUES (?,?,?,?)",
                       (run_id, socket.gethostname(), os.getpid(), time.time()))

    def renew_lease(self, run_id: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE leases SET heartbeat_at = ? WHERE run_id = ? AND pid = ?",
                       (time.time(), run_id, os.getpid()))

    def drop_lease(self, run_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM leases WHERE run_id = ? AND pid = ?", (run_id, os.getpid()))

    def lease(self, run_id: str) -> Lease | None:
        with self._lock:
            row = self._db.execute("SELECT run_id, host, pid, heartbeat_at FROM leases WHERE run_id = ?",
                                   (run_id,)).fetchone()
        return Lease(*row) if row else None

    # ---- share tokens --------------------------------------------------------------------------

    def create_share(self, run_id: str) -> ShareRecord:
        self.get(run_id)
        token = secrets.token_urlsafe(18)
        with self._tx() as db:
            db.execute("INSERT INTO shares (token, run_id, created_at) VALUES (?,?,?)", (token, run_id, time.time()))
        return ShareRecord(token, run_id, time.time(), False)

    def shares(self, run_id: str) -> builtins.list[ShareRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT token, run_id, created_at, revoked FROM shares WHERE run_id = ? ORDER BY created_at",
                (run_id,)).fetchall()
        return [ShareRecord(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def resolve_share(self, token: str) -> ShareRecord | None:
        with self._lock:
            r = self._db.execute("SELECT token, run_id, created_at, revoked FROM shares WHERE token = ?",
                                 (token,)).fetchone()
        return ShareRecord(r[0], r[1], r[2], bool(r[3])) if r else None

    def revoke_share(self, run_id: str, token: str) -> bool:
        with self._tx() as db:
            cur = db.execute("UPDATE shares SET revoked = 1 WHERE token = ? AND run_id = ?", (token, run_id))
            return cur.rowcount > 0

    def _record(self, row: tuple[Any, ...]) -> RunRecord:
        rec = RunRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                        load_summary(row[9]))
        rec.tags = [t for (t,) in self._db.execute("SELECT tag FROM tags WHERE run_id = ? ORDER BY tag", (rec.id,))]
        return rec


def _summary_json(summary: RunSummary | dict[str, Any]) -> str:
    return json.dumps(summary.stored() if isinstance(summary, RunSummary) else summary)
