"""A 1M-event run (bench/synth.py): every tool answers within its stated bound of rows and characters, at the
defaults and at the smallest bounds, and a timeline window within the window latency budget."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from api.mcp.bounds import DEFAULT_CHARS, DEFAULT_ROWS, MIN_CHARS
from tests.api.mcp.conftest import run_session
from tests.helpers.support import bench_module

pytestmark = pytest.mark.slow
EVENTS = 1_000_000
WINDOW_BUDGET_S = 1.0  # a tool's window of a 1M-event run, its index built: well inside a pan's budget


def longest_list(value: Any) -> int:
    """The most rows (dicts or lists) in any list of the answer, its `truncated` lines aside."""
    if isinstance(value, dict):
        return max((longest_list(v) for k, v in value.items() if k != "truncated"), default=0)
    if isinstance(value, list):
        rows = len(value) if any(isinstance(v, dict | list) for v in value) else 0
        return max([rows, *(longest_list(v) for v in value)])
    return 0


def test_every_tool_stays_within_its_bounds_on_a_million_events(tmp_path: Path) -> None:
    from api.app import create_app
    from api.mcp.registry import build_server
    from explorer.config import Settings
    from explorer.runs.ingest import ingest_paths

    trace = tmp_path / "big.json"
    bench_module("synth").write_kineto_trace(trace, EVENTS)
    state = create_app(Settings(data_dir=tmp_path / "data")).state.explorer
    rec = ingest_paths(state.store, [trace], "big")
    other = ingest_paths(state.store, [trace], "big again")
    assert rec.summary.slices > 600_000
    span = rec.summary.span_ns
    run = rec.id
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_runs", {}), ("run_summary", {"run": run}), ("ops", {"run": run}), ("ops", {"run": run, "view": "all"}),
        ("kernels", {"run": run}), ("steps", {"run": run}), ("gaps", {"run": run}),
        ("timeline_window", {"run": run}), ("chain", {"run": run, "slice_id": 1000}),
        ("search", {"run": run, "q": "aten"}), ("sql", {"run": run, "query": "select * from slices"}),
        ("compare", {"run_ids": [run, other.id]}), ("check", {"baseline": run, "candidate": other.id}),
        ("ranks", {"run": run}), ("collectives", {"run": run}), ("device_profiles", {"run": run}),
    ]
    window = {"run": run, "start_ns": span // 2, "end_ns": span // 2 + span // 10}

    async def session(client: Any) -> tuple[list[Any], list[Any], float]:
        default = [await client.call_tool(name, args) for name, args in calls]
        small = [await client.call_tool(name, {**args, "limit": 1, "max_chars": MIN_CHARS}) for name, args in calls]
        await client.call_tool("timeline_window", window)  # the index is built by the first window
        started = time.monotonic()
        await client.call_tool("timeline_window", window)
        return default, small, time.monotonic() - started

    default, small, window_s = run_session(lambda: build_server(state, local=False), session)
    for (name, _), result in zip(calls, default, strict=True):
        text = result.content[0].text
        assert not result.is_error, (name, text[:300])
        assert len(text) <= DEFAULT_CHARS and longest_list(json.loads(text)) <= DEFAULT_ROWS, name
    for (name, _), result in zip(calls, small, strict=True):
        text = result.content[0].text
        assert len(text) <= MIN_CHARS and longest_list(json.loads(text)) <= 1, (name, text[:300])
    answers = {name: json.loads(r.content[0].text) for (name, _), r in zip(calls, default, strict=True)}
    assert answers["search"]["count"] > DEFAULT_ROWS and answers["search"]["truncated"]
    assert answers["sql"]["truncated"] and answers["timeline_window"]["truncated"]
    assert window_s < WINDOW_BUDGET_S
