"""The two catalog backends for tests: a SQLite file in the test's folder, or a fresh PostgreSQL schema.

PostgreSQL runs at 127.0.0.1:5432 on every dev box and CI run (trust auth, database `test`): each use gets
its own schema with a random name, dropped afterwards, and the catalog URL points its search_path there.
When PostgreSQL does not answer, the PostgreSQL half of the tests fails (it does not skip) with a message
that says so.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")


def admin(url: str = PG_URL) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit connection for creating and dropping schemas, or a test failure naming the server."""
    try:
        return psycopg.connect(url.split("?")[0], autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0]
        pytest.fail(f"PostgreSQL at 127.0.0.1:5432 is not answering; the catalog tests need it (start it, or "
                    f"point EXPLORER_TEST_CATALOG_URL at one): {first}", pytrace=False)


def schema_url(base: str, schema: str) -> str:
    """`base` with its search_path set to `schema`: every table the catalog makes or reads is there."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def pg_schema(base: str = PG_URL) -> Iterator[str]:
    """A catalog URL on a new, empty schema; the schema (and all in it) is dropped on exit."""
    schema = "t_" + secrets.token_hex(6)
    with admin(base) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema_url(base, schema)
    finally:
        with admin(base) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@contextmanager
def catalog_url(backend: str, folder: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'catalog.sqlite'}"
        return
    with pg_schema() as url:
        yield url
