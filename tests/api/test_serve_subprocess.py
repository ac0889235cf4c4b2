"""The real server: `trace-explorer serve` in a subprocess on a free port, a real torch.profiler trace
uploaded over HTTP, polled until ready, then its timeline and op table read back."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from api.cli import main, tunnel_hint
from tests.support import serve_subprocess


def _torch_trace(path: Path) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            torch.nn.functional.relu(x @ x + 1)
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with serve_subprocess(tmp_path / "data") as running:
        yield running


@pytest.mark.slow
def test_serve_upload_poll_timeline_and_ops(server: tuple[str, subprocess.Popen[str]], tmp_path: Path) -> None:
    base, _ = server
    trace = _torch_trace(tmp_path / "trace.json")
    with trace.open("rb") as f:
        r = httpx.post(f"{base}/api/runs", files={"files": ("trace.json", f)}, data={"name": "torch cpu"})
    assert r.status_code == 202, r.text
    status_url = base + r.json()["status_url"]
    deadline = time.monotonic() + 60
    while (run := httpx.get(status_url).json())["status"] not in ("ready", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert run["status"] == "ready", run
    window = httpx.get(f"{base}/api/runs/{run['id']}/timeline", params={"width_px": 800}).json()
    names = set(window["names"])
    assert any(n.startswith("aten::") for n in names) and window["tracks"]
    ops = httpx.get(f"{base}/api/runs/{run['id']}/ops", params={"sort": "-cpu_total_ns"}).json()["rows"]
    matmul = next(r for r in ops if r["name"] == "aten::matmul")
    assert matmul["calls"] == 3 and matmul["cpu_total_ns"] > 0


def test_serve_prints_url_and_tunnel() -> None:
    lines = tunnel_hint(8123, "/prefix")
    assert lines[0].endswith("http://127.0.0.1:8123/prefix/")
    assert f"ssh -L 8123:localhost:8123 {socket.gethostname()}" in lines[1]


def test_serve_refuses_public_host_without_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert result.exit_code != 0 and "token" in result.output
