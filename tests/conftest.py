"""Shared fixtures: a fresh data folder per test, the ../shared/traces folder (skip when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer.store.runs import RunStore

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "data")


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is absent (only present beside the project's own checkout)")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def stack_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real torch.profiler(with_stack=True) CPU trace of tests/stack_helper.py, made once per session."""
    pytest.importorskip("torch")
    from tests.stack_helper import profile_with_stack

    return profile_with_stack(tmp_path_factory.mktemp("stack") / "with_stack.json")
