"""--json and --markdown on the table commands (runs, ops, kernels, steps, gaps, ranks), as a user runs them: the JSON
rows are the API twin's rows under the field names docs/cli-output.md lists, the Markdown table renders names as
plain text, the default table is unchanged."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt

from tests.helpers.support import cli

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "api" / "fixtures" / "tiny_kineto.json"
GPU_TRACE = "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
STEP_TRACE = "HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz"  # ProfilerStep#
HOSTILE = "[bold]x <script>alert(1)</script> | *y*"
DOCS = (ROOT / "docs" / "cli-output.md").read_text()


def run(*args: str) -> str:
    done = subprocess.run(cli(*args), capture_output=True, text=True, timeout=120, env=None)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    folder = tmp_path_factory.mktemp("cli") / "data"
    ids = {}
    for role, path, name in (("gpu", shared_traces / GPU_TRACE, "alexnet"), ("hostile", TINY, HOSTILE),
                             ("steps", shared_traces / STEP_TRACE, "event sync")):
        run("ingest", str(path), "--name", name, "--data-dir", str(folder))
        ids[role] = next(r["id"] for r in json.loads(run("runs", "--json", "--data-dir", str(folder)))
                         if r["name"] == name)
    yield folder, ids


def api_rows(folder: Path, path: str, key: str) -> list[dict[str, Any]]:
    from api.app import create_app
    from explorer.config import Settings

    with TestClient(create_app(Settings(data_dir=folder))) as client:
        body = client.get(path).json()
    rows: list[dict[str, Any]] = body
    for part in key.split("."):
        rows = rows[part]  # type: ignore[call-overload]
    return rows


@pytest.mark.parametrize(("command", "twin", "key", "limit"), [
    ("kernels", "/api/runs/{id}/kernels", "rows", 30),
    ("steps", "/api/runs/{id}/steps", "steps", None),
    ("gaps", "/api/runs/{id}/breakdown", "gaps.largest", 30),
    ("ranks", "/api/runs/{id}/ranks", "ranks", None),
    ("ops", "/api/runs/{id}/ops", "rows", 30),
])
def test_json_rows_are_the_api_twins_rows(data: tuple[Path, dict[str, str]], command: str, twin: str, key: str,
                                         limit: int | None) -> None:
    folder, ids = data
    run_id = ids["steps" if command == "steps" else "gpu"]
    rows = json.loads(run(command, run_id, "--json", "--data-dir", str(folder)))
    expected = api_rows(folder, twin.format(id=run_id), key)[:limit]
    if command == "ops":  # the per-name table's input_shapes is always "": not printed
        expected = [{k: v for k, v in r.items() if k != "input_shapes"} for r in expected]
    assert rows == expected and rows
    documented = DOCS.split(f"## `{command}`")[1].split("\n## ")[0]
    for field in rows[0]:
        assert f"`{field}`" in documented, f"{command}: field {field} is not in docs/cli-output.md"


@pytest.mark.parametrize("command", ["kernels", "steps", "gaps", "ranks", "ops", "runs"])
def test_markdown_tables_render_names_as_text(data: tuple[Path, dict[str, str]], command: str) -> None:
    folder, ids = data
    args = (command, "--markdown", "--data-dir", str(folder))
    run_id = ids["steps" if command == "steps" else "gpu"]
    text = run(*args) if command == "runs" else run(command, run_id, *args[1:])
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert html.count("<table>") == 1 and "<script" not in html and "<strong>" not in html
    if command == "runs":
        assert f"<code>{HOSTILE.replace('<', '&lt;').replace('>', '&gt;')}</code>" in html
    default = run(*([command] if command == "runs" else [command, run_id]), "--data-dir", str(folder))
    assert "━" in default or "─" in default  # the default is still the rich table


def test_runs_default_table_prints_the_name_verbatim(data: tuple[Path, dict[str, str]]) -> None:
    folder, _ = data
    text = run("runs", "--data-dir", str(folder))
    assert "[bold]x <script>alert(1)</script>" in text and "alexnet" in text
