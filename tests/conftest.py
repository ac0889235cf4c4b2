"""Shared fixtures: a fresh data folder per test, the ../shared/traces folder (skip when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from explorer.store.runs import RunStore

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
