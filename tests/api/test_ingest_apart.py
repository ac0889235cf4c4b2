"""`serve` ingests each upload in a process of its own (explorer/runs/apart.py): the real server's RSS does
not rise by the ingest's memory (a trace bigger than the memory setting, which in the server's own process
raised it by more than the setting), and a child killed outright fails its run with a message saying so."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from tests.api.test_resilience import start
from tests.helpers.support import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from synth import write_kineto_trace  # noqa: E402

pytestmark = pytest.mark.slow

MEMORY_MB = 64  # the lowest setting; the trace below is bigger than it


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_an_upload_bigger_than_the_setting_does_not_raise_the_servers_rss_by_the_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's RSS while the run is queued or ingesting (polled together with the status, so what the
    server does once the run is ready, loading it for its first views, is not counted): in the server's
    own process this ingest raised it by ~150 MiB."""
    trace = tmp_path / "big.json"
    size = write_kineto_trace(trace, 400_000)
    assert size > MEMORY_MB * 2**20
    monkeypatch.setenv("EXPLORER_INGEST_MEMORY_MB", str(MEMORY_MB))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(tmp_path / "data", port)
    try:
        time.sleep(0.5)
        before = rss_bytes(proc.pid)
        with trace.open("rb") as f:
            run_id = httpx.post(f"{base}/api/runs", files={"files": ("big.json", f)}, timeout=120).json()["id"]
        during: list[int] = []
        deadline = time.monotonic() + 120
        while (run := httpx.get(f"{base}/api/runs/{run_id}").json())["status"] in ("queued", "ingesting"):
            during.append(rss_bytes(proc.pid))
            assert time.monotonic() < deadline, run
            time.sleep(0.01)
        assert run["status"] == "ready", run
        assert run["summary"]["slices"] == 266_664  # 2 of every 3 events (bench/synth.py), flows aside
        assert len(during) > 10
        rise = max(during) - before
        assert rise <= MEMORY_MB * 2**20, (before, max(during))
    finally:
        proc.terminate()
        proc.wait()


def test_an_ingest_process_killed_outright_fails_its_run_and_the_server_goes_on(tmp_path: Path) -> None:
    trace = tmp_path / "big.json"
    write_kineto_trace(trace, 400_000)
    app = create_app(Settings(data_dir=tmp_path / "data"))
    with TestClient(app) as client:
        worker = app.state.explorer.ingester
        with trace.open("rb") as f:
            run_id = client.post("/api/runs", files={"files": ("big.json", f)}).json()["id"]
        deadline = time.monotonic() + 60
        while not worker.processes._running:
            assert time.monotonic() < deadline, "no ingest process started"
            time.sleep(0.01)
        child = next(iter(worker.processes._running))
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while (run := client.get(f"/api/runs/{run_id}").json())["status"] not in ("ready", "failed"):
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
        assert run["status"] == "failed"
        assert run["message"] == ("the ingest process was killed by SIGKILL (most likely out of memory); "
                                  "ingest it again, or with more memory")
        small = tmp_path / "small.json"
        write_kineto_trace(small, 3_000)
        again = client.post("/api/runs", files={"files": ("small.json", small.read_bytes())}).json()
        deadline = time.monotonic() + 60
        while (run := client.get(f"/api/runs/{again['id']}").json())["status"] not in ("ready", "failed"):
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
        assert run["status"] == "ready"
