"""The PostgreSQL switch's one rule, for this process and every process the tests start: a data folder's
catalog is its own schema, the same in every process for the folder's whole life in the session.

Standalone on purpose (the standard library, and psycopg when a schema is made): tests/conftest.py applies it
here, and copies this file as `sitecustomize.py` into a folder it puts on PYTHONPATH, so every Python started
by the tests (the CLI, `serve`, workers, multiprocessing children, the installed wheel's venv) applies it to
explorer.store.runs as that module is imported. The product knows nothing of it.

The folder -> schema table is a JSON file (EXPLORER_TEST_CATALOG_MAP), locked around each read-and-write. A
folder opened first in a scope (EXPLORER_TEST_CATALOG_SCOPE: a test's catalog URL, or the session's) gets a
new schema of that scope; conftest drops a scope's schemas when the scope ends. A RunStore given a catalog URL
other than its scope's (a test of the catalog itself) keeps it.
"""

from __future__ import annotations

import fcntl
import importlib.abc
import importlib.machinery
import inspect
import json
import os
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

BASE = "EXPLORER_TEST_CATALOG_URL"  # the switch: the PostgreSQL database the schemas are made in
MAP = "EXPLORER_TEST_CATALOG_MAP"  # the folder -> [catalog URL, scope, schema] file shared by the session's processes
SCOPE = "EXPLORER_TEST_CATALOG_SCOPE"  # the catalog URL of the scope: the test's schema, else the session's
HOOK = "EXPLORER_TEST_CATALOG_HOOK"  # the folder holding this file as sitecustomize.py (on PYTHONPATH)
TARGET = "explorer.store.runs"

# called with (store, scope) after a RunStore opens its folder's schema (conftest closes them per scope)
on_open: list[Callable[[Any, str], None]] = []


def schema_url(base: str, schema: str) -> str:
    """`base` with its search_path set to `schema`: every table the catalog makes or reads is there."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


def new_schema(base: str) -> tuple[str, str]:
    """A new, empty schema on `base`: (name, catalog URL)."""
    import psycopg

    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(base.split("?")[0], autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema, schema_url(base, schema)


def drop_schemas(base: str, schemas: Sequence[str]) -> None:
    if not schemas:
        return
    import psycopg

    with psycopg.connect(base.split("?")[0], autocommit=True, connect_timeout=5) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def _table(path: Path) -> Iterator[dict[str, list[str]]]:
    """The folder table, locked against the session's other processes; written back on exit."""
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table: dict[str, list[str]] = json.loads(path.read_text()) if path.exists() else {}
        before = dict(table)
        yield table
        if table != before:
            part = path.with_name(f"{path.name}.{os.getpid()}")
            part.write_text(json.dumps(table))
            os.replace(part, path)


def folder_url(data_dir: Path, scope: str) -> str:
    """The catalog URL of `data_dir`'s schema, made (in `scope`) when the folder is first opened."""
    key = str(Path(data_dir).resolve())
    with _table(Path(os.environ[MAP])) as table:
        if key not in table:
            schema, url = new_schema(os.environ[BASE])
            table[key] = [url, scope, schema]
        return table[key][0]


def catalog_of(data_dir: Path) -> str:
    """The catalog URL a RunStore on `data_dir` opens here: its schema with the switch on (made now if the
    folder is new, so a process opening it later finds the same), else "" (catalog.sqlite in the folder)."""
    if not (os.environ.get(MAP) and os.environ.get(BASE)):
        return ""
    return folder_url(data_dir, os.environ.get(SCOPE, ""))


def folders() -> dict[str, list[str]]:
    """The folder table: folder -> [catalog URL, scope, schema]."""
    with _table(Path(os.environ[MAP])) as table:
        return dict(table)


def end_scope(scope: str) -> None:
    """Forget the folders first opened in `scope` and drop their schemas."""
    with _table(Path(os.environ[MAP])) as table:
        gone = [key for key, (_, owner, _) in table.items() if owner == scope]
        schemas = [table.pop(key)[2] for key in gone]
    drop_schemas(os.environ[BASE], schemas)


def patch(cls: Any) -> None:
    """Make RunStore(data_dir, ..., catalog_url) open the folder's schema when catalog_url is empty or the
    scope's URL; any other URL is kept as given."""
    original = cls.__init__
    signature = inspect.signature(original)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        scope = os.environ.get(SCOPE, "")
        routed = bound.arguments["catalog_url"] in ("", scope)
        if routed:
            bound.arguments["catalog_url"] = folder_url(bound.arguments["data_dir"], scope)
        original(*bound.args, **bound.kwargs)
        for hook in on_open if routed else ():
            hook(self, scope)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__init__ = __init__


class _Finder(importlib.abc.MetaPathFinder):
    """Patches RunStore right after explorer.store.runs is executed, wherever that module comes from."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        spec = None
        for finder in sys.meta_path:  # whichever finder would have found it without this one
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            patch(module.RunStore)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """In a process the tests started (sitecustomize): patch RunStore when it is imported."""
    if os.environ.get(MAP) and os.environ.get(BASE) and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


if __name__ == "sitecustomize":
    install()
