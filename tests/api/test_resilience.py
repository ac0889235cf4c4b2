"""The real server under stress: killed mid-ingest it restarts with a consistent catalog; uploads run
concurrently; 200 concurrent timeline requests are all served."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from synth import write_kineto_trace  # noqa: E402

from tests.helpers.support import free_port  # noqa: E402

pytestmark = pytest.mark.slow


def start(data: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", "from api.cli import main; main()", "serve", "--port", str(port),
                             "--data-dir", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/-/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("server did not start")


def wait_done(base: str, run_id: str, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run: dict[str, Any] = httpx.get(f"{base}/api/runs/{run_id}").json()
        if run["status"] in ("ready", "failed"):
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} not done")


def test_killed_mid_ingest_restarts_consistent(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    write_kineto_trace(big, 600_000)
    data, port = tmp_path / "data", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(data, port)
    try:
        with big.open("rb") as f:
            run_id = httpx.post(f"{base}/api/runs", files={"files": ("big.json", f)}, timeout=60).json()["id"]
        deadline = time.monotonic() + 60
        while httpx.get(f"{base}/api/runs/{run_id}").json()["status"] != "ingesting":
            assert time.monotonic() < deadline, "ingest never started"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    proc = start(data, port)
    try:
        run = httpx.get(f"{base}/api/runs/{run_id}").json()
        assert run["status"] == "failed" and "interrupted" in run["message"]
        assert not (data / "runs" / run_id).exists() and list((data / "tmp").iterdir()) == []
        small = tmp_path / "small.json"
        write_kineto_trace(small, 3_000)
        again = httpx.post(f"{base}/api/runs", files={"files": ("small.json", small.read_bytes())}).json()
        assert wait_done(base, again["id"])["status"] == "ready"
    finally:
        proc.terminate()
        proc.wait()


def test_concurrent_uploads_and_200_concurrent_windows(tmp_path: Path) -> None:
    traces = []
    for i in range(3):
        traces.append(tmp_path / f"t{i}.json")
        write_kineto_trace(traces[-1], 20_000 + 1_000 * i)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(tmp_path / "data", port)
    try:
        def upload(path: Path) -> str:
            r = httpx.post(f"{base}/api/runs", files={"files": (path.name, path.read_bytes())}, timeout=60)
            run_id: str = r.json()["id"]
            return run_id

        with ThreadPoolExecutor(3) as pool:
            ids = list(pool.map(upload, traces))
        runs = [wait_done(base, i) for i in ids]
        assert [r["status"] for r in runs] == ["ready"] * 3 and len(set(ids)) == 3

        span = runs[0]["summary"]["span_ns"]

        def window(k: int) -> int:
            start_ns = (k * span) // 400
            params = {"start_ns": start_ns, "end_ns": start_ns + span // 10, "width_px": 2000}
            with httpx.Client(timeout=60) as client:
                return client.get(f"{base}/api/runs/{ids[k % 3]}/timeline", params=params).status_code

        with ThreadPoolExecutor(200) as pool:
            codes = list(pool.map(window, range(200)))
        assert codes == [200] * 200
    finally:
        proc.terminate()
        proc.wait()
