"""Opening the catalog database: which URLs name which backend, the engine with SQLite's per-connection
settings, and the schema revision (Alembic in-process, imported only when a schema must change: a catalog
at HEAD_REVISION is checked with one query). The queries are not here (catalog.py), nor any knowledge of
runs."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from explorer.errors import CatalogUnavailable, require_extra

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

log = logging.getLogger(__name__)

# The URL schemes --catalog-url accepts, and the SQLAlchemy driver each one means. psycopg 3 is named
# explicitly: a bare postgresql:// would make SQLAlchemy look for psycopg2.
DRIVERS = {
    "sqlite": "sqlite+pysqlite",
    "sqlite+pysqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}
SQLITE_BUSY_S = 30.0  # a writer waits this long for another process's write transaction on the same file
PG_MIGRATION_LOCK = 0x7472_6163_6578  # pg_advisory_xact_lock key: one process migrates a database at a time
WRITE = "catalog_write"  # execution option: this transaction writes (SQLite: BEGIN IMMEDIATE)
MIGRATIONS = "explorer.store:migrations"
UPGRADE_HINT = "trace-explorer db upgrade --catalog-url URL"
HEAD_REVISION = "0003"  # the newest of explorer/store/migrations/versions (a test checks it against Alembic's)
VERSION_TABLE = "alembic_version"  # where Alembic records a database's revision (its default)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def parse_catalog_url(url: str) -> URL:
    """The URL with its driver made explicit; CatalogUnavailable names what is wrong with a bad one."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise CatalogUnavailable(f"catalog URL {url!r} is not a URL (postgresql://user@host:port/db or "
                                 "sqlite:///path)") from None
    driver = DRIVERS.get(parsed.drivername)
    if driver is None:
        raise CatalogUnavailable(f"catalog URL scheme {parsed.drivername!r} is not supported "
                                 f"(one of: {', '.join(sorted(DRIVERS))})")
    if driver.startswith("sqlite") and not parsed.database:
        raise CatalogUnavailable("a sqlite catalog URL needs a file path: sqlite:///path/to/catalog.sqlite")
    return parsed.set(drivername=driver)


def shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def make_engine(url: str) -> Engine:
    parsed = parse_catalog_url(url)
    if parsed.drivername.startswith("sqlite"):
        Path(parsed.database or "").parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_S, "check_same_thread": False})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if parsed.get_backend_name() == "postgresql":
        require_extra("psycopg", "a PostgreSQL catalog (--catalog-url postgresql://...)")
    # pre-ping: a pooled connection that PostgreSQL closed (a restart, idle timeout) is replaced, not failed
    return create_engine(parsed, pool_pre_ping=True)


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # the driver's own transaction handling off: SQLAlchemy's "begin" event below emits BEGIN itself
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA journal_mode=WAL")  # readers never wait for the one writer
    dbapi_connection.execute("PRAGMA foreign_keys=ON")  # per connection in SQLite: ON DELETE CASCADE needs it


def _sqlite_begin(conn: Connection) -> None:
    # A write transaction takes the write lock up front: a deferred one that reads first and then writes
    # fails with "database is locked" when another process wrote in between, instead of waiting.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")


@contextmanager
def connect(engine: Engine, what: str) -> Iterator[Connection]:
    """A connection, or CatalogUnavailable naming the database that did not answer (`what` says why we
    were connecting)."""
    try:
        conn = engine.connect()
    except OperationalError as exc:
        first = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise CatalogUnavailable(f"the catalog at {shown(engine.url)} is not answering ({what}): {first}") from None
    with conn:
        yield conn


# ---- schema revision ------------------------------------------------------------------------------------


@functools.cache
def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def _config(conn: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS)
    cfg.attributes["connection"] = conn
    return cfg


def head_revision() -> str:
    """The newest revision of the migration scripts, as Alembic reads them (HEAD_REVISION must equal it)."""
    head = _scripts().get_current_head()
    assert head is not None, "explorer/store/migrations has no revision"
    return head


def current_revision(conn: Connection) -> str | None:
    """The database's revision from Alembic's version table, read as Alembic reads it (None: no table, or an
    empty one), without importing Alembic."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    revisions = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(revisions) > 1:
        raise CatalogUnavailable(f"the catalog at {shown(conn.engine.url)} records several schema revisions "
                                 f"({', '.join(revisions)}); this trace-explorer's migrations have one line")
    return revisions[0] if revisions else None


def upgrade(engine: Engine, to: str = "head") -> tuple[str | None, str]:
    """Bring the schema to the newest revision (or `to`) in one transaction, one process at a time; returns
    the revision before and after. Adopts a catalog made before migrations (revision 0001 is IF NOT EXISTS)."""
    with connect(engine, "upgrading its schema") as conn:
        conn.execution_options(**{WRITE: True})
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK})
            before = current_revision(conn)
            _check_known(engine, before)
            from alembic import command

            command.upgrade(_config(conn), to)
            after = current_revision(conn) or ""
    if before != after:
        log.info("catalog %s upgraded from revision %s to %s", shown(engine.url), before, after)
    return before, after


def _known(revision: str) -> object:
    from alembic.util import CommandError

    try:
        return _scripts().get_revision(revision)
    except CommandError:  # alembic's "no such revision"
        return None


def _check_known(engine: Engine, revision: str | None) -> None:
    if revision is not None and _known(revision) is None:
        raise CatalogUnavailable(f"the catalog at {shown(engine.url)} is at schema revision {revision}, made by "
                                 "a newer trace-explorer than this one; upgrade trace-explorer")


def ensure_schema(engine: Engine) -> None:
    """What opening a catalog does to its schema. The embedded SQLite file is upgraded in place, so an
    existing data folder keeps working after an update. A PostgreSQL database is set up when it is empty
    and must otherwise be at this version's revision: a team server's schema changes by one deliberate
    command (`db upgrade`), not by whichever replica happens to start first."""
    with connect(engine, "opening it") as conn:
        revision = current_revision(conn)
        empty = revision is None and not inspect(conn).get_table_names()
    head = HEAD_REVISION
    if revision == head:
        return
    if engine.dialect.name == "sqlite" or empty:
        upgrade(engine)
        return
    if revision != head:
        _check_known(engine, revision)
        raise CatalogUnavailable(f"the catalog at {shown(engine.url)} is at schema revision {revision}, this "
                                 f"trace-explorer needs {head}: run `{UPGRADE_HINT}` once, then start again")
