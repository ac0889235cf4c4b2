"""The catalog: runs, their status and summary, tags, share tokens and ingest leases, on SQLite (the default,
catalog.sqlite in the data folder) or PostgreSQL, through one set of SQLAlchemy Core queries. Only metadata
lives here; the tables are catalog_schema.py, the URL, engine and revision catalog_db.py."""

from __future__ import annotations

import builtins
import importlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row, delete, event, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from explorer.errors import RunNotFound
from explorer.model.summary import RunSummary, load_summary
from explorer.store.catalog.db import WRITE, connect, ensure_schema, make_engine, shown, sqlite_url
from explorer.store.catalog.schema import leases, runs, shares
from explorer.store.catalog.schema import tags as run_tags

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
    location: str = ""  # the storage key of its files once ready ('' for runs/<id>, as before storage)


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
    """Thread-safe access to the catalog database (a pool of connections, one transaction per call).

    Concurrent writers, threads or processes: every write is one transaction; a read-modify-write
    (replacing a run's tags, adding a share) first locks the run's row (PostgreSQL: SELECT ... FOR UPDATE;
    SQLite: the write transaction is BEGIN IMMEDIATE, one writer at a time), so no update is lost and
    none lands on a run deleted meanwhile."""

    def __init__(self, url: str | Path) -> None:
        """`url`: postgresql://user@host:port/db or sqlite:///path; a Path is that SQLite file."""
        self.opened_on = url  # as given (`url` is for messages: password hidden)
        self._engine = make_engine(sqlite_url(url) if isinstance(url, Path) else url)
        self._closed = False
        # a connection a thread still holds when the catalog closes (an index warm-up, a lease beat) is
        # closed when it comes back, not handed to the disposed pool, which would leave it open
        event.listen(self._engine, "checkin", self._close_late_checkin)
        try:
            ensure_schema(self._engine)
        except BaseException:  # no pooled connection outlives a catalog that failed to open
            self._engine.dispose()
            raise

    @property
    def url(self) -> str:
        """Where the catalog is, password hidden: for messages."""
        return shown(self._engine.url)

    def close(self) -> None:
        self._closed = True
        self._engine.dispose()

    def _close_late_checkin(self, dbapi_connection: Any, _record: Any) -> None:
        if self._closed and dbapi_connection is not None:
            dbapi_connection.close()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with connect(self._engine, "writing") as conn:
            conn.execution_options(**{WRITE: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with connect(self._engine, "reading") as conn, conn.begin():
            yield conn

    def create(self, name: str, source: str = "", sha256: str = "", status: str = "queued") -> RunRecord:
        now = time.time()
        run_id = new_run_id()
        with self._tx() as db:
            db.execute(insert(runs).values(id=run_id, name=name, status=status, created_at=now, updated_at=now,
                                           sha256=sha256, source=source))
        return self.get(run_id)

    def update(self, run_id: str, **fields: Any) -> None:
        allowed = {"name", "status", "progress", "message", "sha256", "source", "summary", "location"}
        sets = {k: (_summary_json(v) if k == "summary" else v) for k, v in fields.items() if k in allowed}
        if not sets:
            return
        sets["updated_at"] = time.time()
        with self._tx() as db:
            if db.execute(update(runs).where(runs.c.id == run_id).values(**sets)).rowcount == 0:
                raise RunNotFound(run_id)

    def delete(self, run_id: str) -> None:
        with self._tx() as db:
            if db.execute(delete(runs).where(runs.c.id == run_id)).rowcount == 0:
                raise RunNotFound(run_id)

    def get(self, run_id: str) -> RunRecord:
        with self._read() as db:
            row = db.execute(select(runs).where(runs.c.id == run_id)).one_or_none()
            if row is None:
                raise RunNotFound(run_id)
            return _records(db, [row])[0]

    def find_by_sha(self, sha256: str) -> RunRecord | None:
        query = (select(runs).where(runs.c.sha256 == sha256, runs.c.status != "failed")
                 .order_by(runs.c.created_at).limit(1))
        with self._read() as db:
            row = db.execute(query).one_or_none()
            return _records(db, [row])[0] if row else None

    def list(self, name: str | None = None, tag: str | None = None, status: str | None = None,
             limit: int = 100, offset: int = 0) -> tuple[builtins.list[RunRecord], int]:
        where = _list_filter(name, tag, status)
        with self._read() as db:
            total = db.execute(select(func.count()).select_from(runs).where(*where)).scalar_one()
            rows = db.execute(select(runs).where(*where).order_by(runs.c.created_at.desc(), runs.c.id)
                              .limit(limit).offset(offset)).all()
            return _records(db, rows), int(total)

    def set_tags(self, run_id: str, tags: builtins.list[str]) -> None:
        """Replace the run's tags. Two concurrent calls leave one call's tags, never a mix of both."""
        with self._tx() as db:
            _lock_run(db, run_id)
            db.execute(delete(run_tags).where(run_tags.c.run_id == run_id))
            unique = list(dict.fromkeys(tags))
            if unique:
                db.execute(insert(run_tags), [{"run_id": run_id, "tag": t} for t in unique])

    def locations(self) -> dict[str, tuple[str, str]]:
        """Every run's status and storage location, by id, in one query: what the storage sweep keeps."""
        with self._read() as db:
            return {r.id: (r.status, r.location) for r in db.execute(select(runs.c.id, runs.c.status, runs.c.location))}

    def unfinished(self) -> builtins.list[RunRecord]:
        with self._read() as db:
            rows = db.execute(select(runs).where(runs.c.status.in_(("queued", "ingesting")))).all()
            return _records(db, rows)

    # ---- ingest leases ------------------------------------------------------------------------

    def take_lease(self, run_id: str) -> None:
        """This process ingests the run from now on (whoever held the lease before)."""
        values = {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(), "heartbeat_at": time.time()}
        try:
            with self._tx() as db:
                db.execute(_upsert(db, leases, values, key="run_id"))
        except IntegrityError:  # the run was deleted meanwhile (the lease's foreign key)
            raise RunNotFound(run_id) from None

    def renew_lease(self, run_id: str) -> bool:
        """Refresh this process's lease; False when it holds none (dropped, or taken over)."""
        with self._tx() as db:
            return bool(db.execute(update(leases).where(_lease_is_mine(run_id)).values(
                heartbeat_at=time.time())).rowcount)

    def drop_lease(self, run_id: str) -> None:
        with self._tx() as db:
            db.execute(delete(leases).where(_lease_is_mine(run_id)))

    def lease(self, run_id: str) -> Lease | None:
        with self._read() as db:
            row = db.execute(select(leases).where(leases.c.run_id == run_id)).one_or_none()
        return Lease(row.run_id, row.host, row.pid, row.heartbeat_at) if row else None

    # ---- share tokens --------------------------------------------------------------------------

    def create_share(self, run_id: str) -> ShareRecord:
        token, now = secrets.token_urlsafe(18), time.time()
        with self._tx() as db:
            _lock_run(db, run_id)
            db.execute(insert(shares).values(token=token, run_id=run_id, created_at=now))
        return ShareRecord(token, run_id, now, False)

    def shares(self, run_id: str) -> builtins.list[ShareRecord]:
        with self._read() as db:
            rows = db.execute(select(shares).where(shares.c.run_id == run_id)
                              .order_by(shares.c.created_at, shares.c.token)).all()
        return [_share(r) for r in rows]

    def resolve_share(self, token: str) -> ShareRecord | None:
        with self._read() as db:
            row = db.execute(select(shares).where(shares.c.token == token)).one_or_none()
        return _share(row) if row else None

    def revoke_share(self, run_id: str, token: str) -> bool:
        with self._tx() as db:
            return bool(db.execute(update(shares).where(shares.c.token == token, shares.c.run_id == run_id)
                                   .values(revoked=1)).rowcount)


def _lease_is_mine(run_id: str) -> ColumnElement[bool]:
    """The run's lease as held by this process: host and pid, since pids repeat across machines."""
    return (leases.c.run_id == run_id) & (leases.c.host == socket.gethostname()) & (leases.c.pid == os.getpid())


def _lock_run(db: Connection, run_id: str) -> None:
    """Lock the run's row until the transaction ends (FOR UPDATE; SQLite's write transaction already
    excludes other writers, and SQLAlchemy renders nothing there), or RunNotFound."""
    if db.execute(select(runs.c.id).where(runs.c.id == run_id).with_for_update()).one_or_none() is None:
        raise RunNotFound(run_id)


def _upsert(db: Connection, table: Any, values: dict[str, Any], key: str) -> Any:
    """INSERT ... ON CONFLICT (key) DO UPDATE: the same statement in both dialects, built by each one's own
    insert construct."""
    # each dialect's construct imported here: a SQLite catalog's process never loads PostgreSQL's (~70 ms)
    dialect = importlib.import_module(f"sqlalchemy.dialects.{db.dialect.name}")
    stmt = dialect.insert(table).values(**values)
    return stmt.on_conflict_do_update(index_elements=[key],
                                      set_={k: stmt.excluded[k] for k in values if k != key})


def _list_filter(name: str | None, tag: str | None, status: str | None) -> builtins.list[ColumnElement[bool]]:
    """The run list's WHERE: name contains (case-insensitive, % and _ literal), has the tag, has the status."""
    where: builtins.list[ColumnElement[bool]] = []
    if name:
        escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append(runs.c.name.ilike(f"%{escaped}%", escape="\\"))
    if tag:
        where.append(runs.c.id.in_(select(run_tags.c.run_id).where(run_tags.c.tag == tag)))
    if status:
        where.append(runs.c.status == status)
    return where


def _records(db: Connection, rows: Sequence[Row[Any]]) -> builtins.list[RunRecord]:
    """Records with their tags, read in one query for all of them."""
    by_run: dict[str, builtins.list[str]] = {r.id: [] for r in rows}
    if by_run:
        for run_id, tag in db.execute(select(run_tags.c.run_id, run_tags.c.tag).where(run_tags.c.run_id.in_(list(by_run)))
                                      .order_by(run_tags.c.tag)):
            by_run[run_id].append(tag)
    return [RunRecord(r.id, r.name, r.status, r.progress, r.message, r.created_at, r.updated_at, r.sha256,
                      r.source, load_summary(r.summary), by_run[r.id], r.location) for r in rows]


def _share(row: Row[Any]) -> ShareRecord:
    return ShareRecord(row.token, row.run_id, row.created_at, bool(row.revoked))


def _summary_json(summary: RunSummary | dict[str, Any]) -> str:
    return json.dumps(summary.stored() if isinstance(summary, RunSummary) else summary)
