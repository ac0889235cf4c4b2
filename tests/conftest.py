"""Shared fixtures: a fresh data folder per test, the ../shared/traces folder (skip when absent).

The PostgreSQL switch: with EXPLORER_TEST_CATALOG_URL=postgresql://postgres@127.0.0.1:5432/test, every
catalog the suite opens is on that PostgreSQL instead of catalog.sqlite. The rule (tests/helpers/catalog_hook.py):
each data folder has its own schema, made when the folder is first opened and the same for the folder's whole
life in the session, in this process and in every process the tests start (the CLI, `serve`, workers, the
installed wheel's venv: a sitecustomize.py on PYTHONPATH applies the same rule there), through one folder ->
schema file shared by all of them. A folder first opened during a test (its RunStores, its apps, the CLI and
server processes it starts: EXPLORER_CATALOG_URL is the test's own schema) has its schema dropped when the
test ends; one first opened by a session- or module-wide fixture keeps it until the session ends. A catalog
URL given explicitly (a test of the catalog itself) is kept as given. All schemas are dropped at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from explorer.store.runs import RunStore
from tests.fuzz import report as fuzz
from tests.helpers import catalog_hook
from tests.helpers.catalog_backends import pg_schema
from tests.helpers.s3_server import moto_server
from tests.helpers.support import cli

# No test reads or writes the user's own data folder: the default one (explorer.config.user_data_dir) is a fresh
# folder of this test process, inherited by every process it starts.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="trace-explorer-tests-")

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Starlette's TestClient names the server `testserver`: a Host the guard (api/middleware/guard.py) refuses unless told
os.environ.setdefault("EXPLORER_ALLOWED_HOSTS", '["testserver"]')
TEST_CATALOG_URL = os.environ.get("EXPLORER_TEST_CATALOG_URL", "")  # the PostgreSQL switch (docstring)


# What CI requires (`make test` sets these like REQUIRE_BROWSER): a test skipped for want of it fails instead, so
# the JavaScript tests and the tests on the shared real traces cannot skip silently. Matched on the skip's reason.
REQUIRED_SKIPS = {"REQUIRE_NODE": ("node is not installed",),
                  "REQUIRE_SHARED": ("../shared/traces", "shared real traces")}


def required_skip(reason: str, environ: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """The REQUIRE_* variable set in `environ` that forbids a skip with this reason, or None."""
    return next((var for var, marks in REQUIRED_SKIPS.items()
                 if environ.get(var) and any(mark in reason for mark in marks)), None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        var = required_skip(reason)
        if var is not None:
            report.outcome = "failed"
            report.longrepr = f"{var}=1 forbids this skip: {reason}"


class CatalogSwitch:
    """The RunStores this process opened on folder schemas, by scope (a test's catalog URL or the
    session's), to close them."""

    def __init__(self) -> None:
        self.opened: dict[str, list[RunStore]] = {}
        self.retired: list[RunStore] = []

    def record(self, store: RunStore, scope: str) -> None:
        self.opened.setdefault(scope, []).append(store)

    def close(self, scope: str) -> None:
        """Close the stores of the test before last, retire this test's: an app's background thread (the
        index warm-up) can still hold a pooled connection as its test ends, and a connection handed back
        to a closed pool is never closed (psycopg's ResourceWarning, an error here)."""
        for store in self.retired:
            store.catalog.close()
        self.retired = self.opened.pop(scope, [])


@pytest.fixture(scope="session", autouse=True)
def _catalog_switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogSwitch | None]:
    if not TEST_CATALOG_URL:
        yield None
        return
    switch = CatalogSwitch()
    hook_dir = tmp_path_factory.mktemp("catalog_hook")
    shutil.copyfile(Path(catalog_hook.__file__), hook_dir / "sitecustomize.py")
    pythonpath = os.environ.get("PYTHONPATH")
    original = RunStore.__init__
    with pg_schema(TEST_CATALOG_URL) as session_url:
        saved = {name: os.environ.get(name) for name in
                 ("EXPLORER_CATALOG_URL", "PYTHONPATH", catalog_hook.MAP, catalog_hook.SCOPE, catalog_hook.HOOK)}
        os.environ.update({
            "EXPLORER_CATALOG_URL": session_url, catalog_hook.SCOPE: session_url,
            catalog_hook.MAP: str(hook_dir / "folders.json"), catalog_hook.HOOK: str(hook_dir),
            "PYTHONPATH": os.pathsep.join([str(hook_dir), *([pythonpath] if pythonpath else [])])})
        catalog_hook.patch(RunStore)
        catalog_hook.on_open.append(switch.record)
        try:
            yield switch
        finally:
            catalog_hook.on_open.remove(switch.record)
            RunStore.__init__ = original  # type: ignore[method-assign]
            switch.close(session_url)
            switch.close("")  # the session's stores, retired just above
            for scope in {scope for _, scope, _ in catalog_hook.folders().values()}:
                catalog_hook.end_scope(scope)
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@pytest.fixture(autouse=True)
def _test_catalog(_catalog_switch: CatalogSwitch | None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """With the switch on, this test's scope: its catalog URL is a fresh schema, and the schemas of the
    folders first opened in it are dropped when the test ends."""
    if _catalog_switch is None:
        yield
        return
    with pg_schema(TEST_CATALOG_URL) as url:
        monkeypatch.setenv("EXPLORER_CATALOG_URL", url)
        monkeypatch.setenv(catalog_hook.SCOPE, url)
        try:
            yield
        finally:
            _catalog_switch.close(url)
            catalog_hook.end_scope(url)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "data")


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is absent (only present beside the project's own checkout)")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`trace-explorer demo --no-serve` on CPU, run once (tests/test_demo.py, tests/analysis/test_check.py)."""
    data = tmp_path_factory.mktemp("demo") / "data"
    proc = subprocess.run(cli("demo", "--no-serve", "--device", "cpu", "--data-dir", str(data)),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"data": data, "stdout": proc.stdout, "stderr": proc.stderr}


@pytest.fixture(scope="session")
def stack_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real torch.profiler(with_stack=True) CPU trace of tests/helpers/stack_helper.py, made once per session."""
    pytest.importorskip("torch")
    from tests.helpers.stack_helper import profile_with_stack

    return profile_with_stack(tmp_path_factory.mktemp("stack") / "with_stack.json")


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real S3 API for the session: moto's server (tests/helpers/s3_server.py); each test makes its own
    bucket there (s3_server.new_bucket)."""
    with moto_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


# ---- the fuzz figures in the terminal summary (tests/fuzz/report.py), with or without xdist's workers ----

def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)  # set on an xdist worker only
    if output is not None:
        fuzz.hand_over(output)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    fuzz.take_over(getattr(node, "workeroutput", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if fuzz.FUZZ_REPORT:
        terminalreporter.section("fuzz figures")
        for entry in fuzz.FUZZ_REPORT.values():
            terminalreporter.write_line(entry["text"])
