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
from tests.helpers.support import serve_subprocess


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


def _lines_until(proc: subprocess.Popen[str], prefix: str) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith(prefix):
        line = proc.stdout.readline()
        assert line, f"server output ended before {prefix!r}: {lines}"
        lines.append(line.rstrip("\n"))
    return lines


@pytest.mark.slow
def test_serve_a_trace_opens_it_and_reuses_it(tmp_path: Path) -> None:
    """`trace-explorer serve trace.json`: ingested, served, the run's address and the ssh line printed; served
    again, the identical run is reused (one run in the folder)."""
    trace = _torch_trace(tmp_path / "trace.json")
    data = tmp_path / "data"
    with serve_subprocess(data, str(trace)) as (base, proc):
        lines = _lines_until(proc, "Run ")
        assert any(line.startswith(f"{trace}: ingested as run ") for line in lines), lines
        assert any(line.startswith(f"Data folder {data.resolve()}: 1 run") for line in lines), lines
        assert any("ssh -L" in line and socket.gethostname() in line for line in lines), lines
        assert any(line.startswith("Agent tools (MCP, streamable HTTP): ") and line.split()[-2] == base + "/mcp"
                   for line in lines), lines  # the dev install has the mcp extra
        url = lines[-1].split(": ", 1)[1]
        assert url.startswith(base + "/runs/")
        page = httpx.get(url)
        assert page.status_code == 200 and "trace" in page.text
    with serve_subprocess(data, str(trace)) as (_, proc):
        lines = _lines_until(proc, "Run ")
        assert any(line.startswith(f"{trace}: already ingested as run ") for line in lines), lines
        assert any(line.startswith(f"Data folder {data.resolve()}: 1 run") for line in lines), lines


def test_serve_on_a_busy_port_names_the_next_free_one(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--port", str(port), "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 2, result.output
    assert f"port {port} on 127.0.0.1 is in use" in result.output
    assert "the next free port is" in result.output and "trace-explorer serve --port" in result.output
    assert "serving at" not in result.output and "ssh -L" not in result.output
    assert not (tmp_path / "d").exists()


def test_open_is_serve_under_the_name_users_look_for(tmp_path: Path) -> None:
    serve_cmd, open_cmd = main.commands["serve"], main.commands["open"]
    assert open_cmd.callback is serve_cmd.callback and open_cmd.params == serve_cmd.params
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}')
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["open", str(trace), "--port", str(port), "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 2 and f"port {port} on 127.0.0.1 is in use" in result.output
