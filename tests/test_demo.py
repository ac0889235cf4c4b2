"""`trace-explorer demo --no-serve` on CPU: three RMSNorm runs, their op tables and their comparison.

The demo runs in a subprocess, as a user runs it (torch.compile spawns workers and warns in ways
that are not ours to turn into errors); the results are read back through the store and the API.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.demo import NAIVE_OPS_PER_STEP
from explorer.model.demo import ACTIVE_STEPS, DEMO_TAG, RUN_NAMES, demo_note
from explorer.store.queries import load_ops
from explorer.store.runs import RunStore
from tests.helpers.support import cli

pytestmark = pytest.mark.slow


def compiler_present() -> bool:
    """torch.compile on CPU generates C++: without a compiler the demo must continue with two runs."""
    return bool(os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++"))


def demo_runs(demo_run: dict[str, Any]) -> tuple[RunStore, dict[str, str]]:
    store = RunStore(demo_run["data"])
    records, _ = store.catalog.list(tag=DEMO_TAG)
    return store, {r.name: r.id for r in records}


def test_demo_makes_three_runs_and_prints_the_compare_url(demo_run: dict[str, Any]) -> None:
    store, runs = demo_runs(demo_run)
    expected = list(RUN_NAMES.values()) if compiler_present() else list(RUN_NAMES.values())[:2]
    assert sorted(runs) == sorted(expected), demo_run["stderr"][-2000:]
    assert all(store.get(i).status == "ready" for i in runs.values())
    url = demo_run["stdout"].strip().splitlines()[-1]
    assert url == "http://localhost:8000/compare?runs=" + ",".join(runs[n] for n in expected)
    assert "What each version costs" in demo_run["stderr"] and "baseline" in demo_run["stderr"]
    assert "profiling on cpu" in demo_run["stderr"]
    if not compiler_present():
        assert "torch.compile" in demo_run["stderr"] and "continuing with 2 runs" in demo_run["stderr"]


def test_demo_output_has_no_profiler_noise_and_says_how_to_serve(demo_run: dict[str, Any]) -> None:
    output = demo_run["stdout"] + demo_run["stderr"]
    assert "USDT" not in output and "STAGE:" not in output, output[-3000:]
    assert "profiling on cpu" in demo_run["stderr"]  # our own progress lines still show
    assert demo_run["stdout"].strip().splitlines()[-1].startswith("http://localhost:8000/compare?runs=")
    assert f"trace-explorer serve --port 8000 --data-dir {demo_run['data'].resolve()}" in demo_run["stderr"]


NATIVE_WRITER = r"""
import os, sys
from explorer.demo import quiet_profiler_noise
with quiet_profiler_noise():
    os.write(2, b"USDT:2026-12-01 12:58:30 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
    os.write(2, b"a native warning worth seeing\n  STAGE:noise too\n")
    sys.stderr.write("python progress\n")  # one write: lines from Python and from the pipe may interleave
os.write(2, b"after the block\n")
"""


def test_profiler_noise_filter_keeps_everything_else() -> None:
    proc = subprocess.run([sys.executable, "-c", NATIVE_WRITER], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert sorted(lines) == sorted(["a native warning worth seeing", "python progress", "after the block"])
    assert lines[-1] == "after the block"  # the filter is drained before the block ends


def test_naive_run_has_the_six_ops(demo_run: dict[str, Any]) -> None:
    store, runs = demo_runs(demo_run)
    rows = {r["name"]: r for r in load_ops(store, runs[RUN_NAMES["naive"]])}
    for name, per_step in NAIVE_OPS_PER_STEP.items():
        assert rows[name]["calls"] == per_step * ACTIVE_STEPS, name
        assert rows[name]["cpu_total_ns"] > 0
    assert rows["ProfilerStep*"]["calls"] == ACTIVE_STEPS  # warm-up steps are not in the trace
    assert "aten::rms_norm" not in rows


def test_fused_run_calls_rms_norm(demo_run: dict[str, Any]) -> None:
    store, runs = demo_runs(demo_run)
    rows = {r["name"]: r for r in load_ops(store, runs[RUN_NAMES["fused"]])}
    assert rows["aten::rms_norm"]["calls"] == ACTIVE_STEPS


def test_compare_shows_the_fused_op_in_place_of_the_naive_steps(demo_run: dict[str, Any]) -> None:
    _, runs = demo_runs(demo_run)
    ids = [runs[n] for n in RUN_NAMES.values() if n in runs]
    with TestClient(create_app(Settings(data_dir=demo_run["data"]))) as client:
        response = client.get("/api/compare", params={"runs": ",".join(ids)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["name"] for r in body["runs"]] == [n for n in RUN_NAMES.values() if n in runs]
    assert body["headline"]["baseline"] == ids[0]
    step_row = next(r for r in body["rows"] if r["name"] == "ProfilerStep*")
    assert step_row["per_run"][0]["calls"] == ACTIVE_STEPS
    if RUN_NAMES["compiled"] not in runs:
        pytest.skip("no torch.compile here; on a CPU torch.rms_norm runs the same six steps internally, "
                    "so naive vs fused is within noise")
    # CPU only: no device time, and step times on this shared 2-core box swing with the other test worker
    # (CI has seen naive's fastest step at 4.1 ms against fused 7.8 and compiled 7.5, and at 2.9 against 1.8
    # and 8.0): what the compare must show whatever the load is the ops that differ, the fused run's
    # aten::rms_norm where the naive run has its separate steps
    by_name = {r["name"]: r for r in body["rows"]}
    assert by_name["aten::rms_norm"]["per_run"][0] is None and by_name["aten::rms_norm"]["per_run"][1] is not None
    assert by_name["aten::rsqrt"]["per_run"][0] is not None


def test_demo_continues_without_torch_compile(tmp_path: Path) -> None:
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler"), "COLUMNS": "200",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}  # a fresh cache: the compiler is needed
    data = tmp_path / "data"
    proc = subprocess.run(cli("demo", "--no-serve", "--device", "cpu", "--data-dir", str(data), "--port", "8123"),
                          capture_output=True, text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torch.compile is not usable here" in proc.stderr and "continuing with 2 runs" in proc.stderr
    records, _ = RunStore(data).catalog.list(tag=DEMO_TAG)
    assert sorted(r.name for r in records) == sorted([RUN_NAMES["naive"], RUN_NAMES["fused"]])
    assert proc.stdout.strip().count(",") == 1  # the compare URL names the two runs
    # the URL is for the port the user asked for, and the demo says which server to start for it
    assert proc.stdout.strip().startswith("http://localhost:8123/compare?runs=")
    assert f"trace-explorer serve --port 8123 --data-dir {data.resolve()}" in proc.stderr


def test_demo_without_torch_says_how_to_install(tmp_path: Path) -> None:
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('No module named torch')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker), "COLUMNS": "200"}
    proc = subprocess.run(cli("demo", "--no-serve", "--data-dir", str(tmp_path / "data")), capture_output=True,
                          text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    message = re.sub(r"\s+", " ", proc.stderr)
    assert "needs PyTorch" in message and "pip install torch" in message, proc.stderr


def test_compare_page_explains_what_you_are_looking_at(demo_run: dict[str, Any]) -> None:
    _, runs = demo_runs(demo_run)
    ids = ",".join(runs[n] for n in RUN_NAMES.values() if n in runs)
    with TestClient(create_app(Settings(data_dir=demo_run["data"]))) as client:
        page = client.get("/compare", params={"runs": ids})
    assert page.status_code == 200, page.text[:500]
    assert 'id="demo-note"' in page.text and "What you are looking at" in page.text
    assert "six separate PyTorch operations" in page.text


def test_demo_note_only_for_demo_runs() -> None:
    assert demo_note(RUN_NAMES.values()) and demo_note([RUN_NAMES["naive"], RUN_NAMES["fused"]])
    assert demo_note([RUN_NAMES["naive"], "my training step"]) == ()
    assert demo_note([]) == ()
