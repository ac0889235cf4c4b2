"""Shared fixtures: a fresh data folder per test, the ../shared/traces folder (skip when absent)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from explorer.store.runs import RunStore
from tests.support import cli

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Starlette's TestClient names the server `testserver`: a Host the guard (api/guard.py) refuses unless told
os.environ.setdefault("EXPLORER_ALLOWED_HOSTS", '["testserver"]')


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
    """`trace-explorer demo --no-serve` on CPU, run once (tests/test_demo.py, tests/test_check.py)."""
    data = tmp_path_factory.mktemp("demo") / "data"
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
