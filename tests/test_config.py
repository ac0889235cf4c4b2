"""One settings object, passed in: cache sizes and SQL limits are Settings fields with help text, they
reach the store and the app's caches, and nothing outside explorer/config.py reads the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import PROJECT_ROOT, Settings

CACHE_AND_LIMITS = ("cache_runs", "cache_memory_mb", "derived_cache_entries", "op_table_cache", "sql_timeout_s",
                    "sql_max_rows")


def test_every_setting_has_help_text() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description, name
    assert set(CACHE_AND_LIMITS) <= set(Settings.model_fields)


def test_cache_sizes_reach_the_caches(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", cache_runs=1, derived_cache_entries=2, op_table_cache=3,
                        device_cache_entries=4, cache_memory_mb=5)
    with TestClient(create_app(settings)) as client:
        state = client.app.state.explorer  # type: ignore[attr-defined]
        assert (state.store._cache.max_runs, state.runs.memo._max, state.store.derived._max, state.runs.device_memo._max) == (
            1, 2, 3, 4)
        # one memory budget for all of them
        assert state.store.budget.limit_bytes == 5 * 2**20
        assert state.runs.memo.budget is state.runs.device_memo.budget is state.store.derived.budget is state.store.budget


# not configuration: the process environment handed to a child whole, unread
PASSED_ON = {"explorer/runs/apart.py": "the server's environment, as it is now, for its ingest process",
             # a variable set for Arrow's C++ library to read as pyarrow loads (a user's own value is kept)
             "explorer/native/memory.py": "ARROW_DEFAULT_MEMORY_POOL for the processes that will ingest"}


def test_nothing_else_reads_the_environment() -> None:
    readers = []
    for folder in ("explorer", "api"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if str(path.relative_to(PROJECT_ROOT)) in PASSED_ON:
                    continue
                if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv"):
                    readers.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}")
    assert readers == []


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="the machine's memory as Linux reports it")
def test_the_runs_kept_in_memory_take_a_third_of_the_machine_by_default() -> None:
    total_kib = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
    assert abs(Settings().cache_memory_mb - total_kib / 1024 / 3) <= 1
