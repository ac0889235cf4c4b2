"""Shared fixtures: a fresh data folder per test, the ../shared/traces folder (skip when absent).

The PostgreSQL switch: with EXPLORER_TEST_CATALOG_URL=postgresql://postgres@127.0.0.1:5432/test, every
catalog the suite opens is on that PostgreSQL instead of catalog.sqlite: each test gets a fresh schema (its
RunStores, its apps, and the CLI and server processes it starts, through EXPLORER_CATALOG_URL), and stores
made by session- or module-wide fixtures share one session schema; all are dropped afterwards.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from explorer.store.runs import RunStore
from explorer.store.storage import Storage
from tests.store.catalog_backends import pg_schema
from tests.store.s3_server import moto_server
from tests.support import cli

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Starlette's TestClient names the server `testserver`: a Host the guard (api/guard.py) refuses unless told
os.environ.setdefault("EXPLORER_ALLOWED_HOSTS", '["testserver"]')
TEST_CATALOG_URL = os.environ.get("EXPLORER_TEST_CATALOG_URL", "")  # the PostgreSQL switch (docstring)


class CatalogSwitch:
    """Which catalog each data folder's RunStore opens while the switch is on: the one that was current
    (EXPLORER_CATALOG_URL: the test's schema, else the session's) when the folder was first opened, so a
    folder made by a session fixture keeps its catalog in every later test."""

    def __init__(self) -> None:
        self.by_folder: dict[Path, str] = {}
        self.opened: dict[str, list[RunStore]] = {}
        self.retired: list[RunStore] = []

    def url_for(self, data_dir: Path) -> str:
        return self.by_folder.setdefault(data_dir.resolve(), os.environ["EXPLORER_CATALOG_URL"])

    def close(self, url: str) -> None:
        """Close the stores of the test before last, retire this test's: an app's background thread (the
        index warm-up) can still hold a pooled connection as its test ends, and a connection handed back
        to a closed pool is never closed (psycopg's ResourceWarning, an error here)."""
        for store in self.retired:
            store.catalog.close()
        self.retired = self.opened.pop(url, [])


@pytest.fixture(scope="session", autouse=True)
def _catalog_switch() -> Iterator[CatalogSwitch | None]:
    if not TEST_CATALOG_URL:
        yield None
        return
    switch = CatalogSwitch()
    original = RunStore.__init__

    def init(self: RunStore, data_dir: Path, cache_runs: int = 4, op_table_cache: int = 8,
             catalog_url: str = "", storage: Storage | None = None) -> None:
        # an explicit URL other than the environment's (a test of the catalog itself) is kept as given
        url = catalog_url if catalog_url and catalog_url != os.environ.get("EXPLORER_CATALOG_URL") \
            else switch.url_for(data_dir)
        original(self, data_dir, cache_runs, op_table_cache, url, storage)
        switch.opened.setdefault(url, []).append(self)

    with pg_schema(TEST_CATALOG_URL) as session_url:
        saved = os.environ.get("EXPLORER_CATALOG_URL")
        os.environ["EXPLORER_CATALOG_URL"] = session_url
        RunStore.__init__ = init  # type: ignore[method-assign]
        try:
            yield switch
        finally:
            RunStore.__init__ = original  # type: ignore[method-assign]
            switch.close(session_url)
            switch.close("")
            if saved is None:
                os.environ.pop("EXPLORER_CATALOG_URL")
            else:
                os.environ["EXPLORER_CATALOG_URL"] = saved


@pytest.fixture(autouse=True)
def _test_catalog(_catalog_switch: CatalogSwitch | None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """With the switch on, this test's catalog is a fresh schema, dropped when the test ends."""
    if _catalog_switch is None:
        yield
        return
    with pg_schema(TEST_CATALOG_URL) as url:
        monkeypatch.setenv("EXPLORER_CATALOG_URL", url)
        try:
            yield
        finally:
            _catalog_switch.close(url)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "data")


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is absent (only present beside the project's own checkout)")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory, _catalog_switch: CatalogSwitch | None) -> dict[str, Any]:
    """`trace-explorer demo --no-serve` on CPU, run once (tests/test_demo.py, tests/test_check.py)."""
    data = tmp_path_factory.mktemp("demo") / "data"
    if _catalog_switch is not None:  # the demo process writes the session's catalog: so do later opens
        _catalog_switch.url_for(data)
    proc = subprocess.run(cli("demo", "--no-serve", "--device", "cpu", "--data-dir", str(data)),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"data": data, "stdout": proc.stdout, "stderr": proc.stderr}


@pytest.fixture(scope="session")
def stack_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real torch.profiler(with_stack=True) CPU trace of tests/stack_helper.py, made once per session."""
    pytest.importorskip("torch")
    from tests.stack_helper import profile_with_stack

    return profile_with_stack(tmp_path_factory.mktemp("stack") / "with_stack.json")


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real S3 API for the session: moto's server (tests/store/s3_server.py); each test makes its own
    bucket there (s3_server.new_bucket)."""
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint
