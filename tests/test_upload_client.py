"""`trace-explorer upload` against `trace-explorer serve` started in a subprocess on a free port.

Covers a file and a folder upload with the token, the server's error when the token is missing, a
run whose ingest fails, and the multipart body the client streams.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from explorer.upload_client import MultipartBody, UploadPart, normalize_server
from tests.helpers.support import cli, free_port

TINY = Path(__file__).resolve().parent / "api" / "fixtures" / "tiny_kineto.json"
TOKEN = "test-token-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real server process (loopback, with a token) over a fresh data folder; its base URL."""
    data = tmp_path_factory.mktemp("served") / "data"
    port = free_port()
    log = (data.parent / "server.log").open("w")
    proc = subprocess.Popen(cli("serve", "--port", str(port), "--data-dir", str(data), "--token", TOKEN),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (data.parent / "server.log").read_text()
            try:
                if httpx.get(f"{url}/-/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def upload(*args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EXPLORER_TOKEN"} | {"COLUMNS": "200"}
    if token:
        env["EXPLORER_TOKEN"] = token
    return subprocess.run(cli("upload", *args), capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)


def get_run(server: str, run_id: str) -> dict[str, object]:
    r = httpx.get(f"{server}/api/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == 200, r.text
    body: dict[str, object] = r.json()
    return body


def test_upload_file_waits_and_prints_run_url(server: str) -> None:
    proc = upload(server, str(TINY), "--name", "tiny upload", "--tag", "ci", "--tag", "cli")
    assert proc.returncode == 0, proc.stderr
    url = proc.stdout.strip().splitlines()[-1]
    assert url.startswith(f"{server}/runs/r")
    run = get_run(server, url.rsplit("/", 1)[1])
    assert run["status"] == "ready" and run["name"] == "tiny upload"
    assert sorted(run["tags"]) == ["ci", "cli"]  # type: ignore[arg-type]
    assert "ready" in proc.stderr
    page = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert page.status_code == 200


def test_upload_folder_goes_as_one_archive(server: str, tmp_path: Path) -> None:
    capture = tmp_path / "capture" / "rank0"
    capture.mkdir(parents=True)
    (capture / "trace.json").write_bytes(TINY.read_bytes())
    (capture.parent / "notes.txt").write_text("not a trace\n")
    proc = upload(server, str(capture.parent), "--token", TOKEN)
    assert proc.returncode == 0, proc.stderr
    run = get_run(server, proc.stdout.strip().rsplit("/", 1)[1])
    assert run["status"] == "ready"
    names = [a["name"] for a in run["summary"]["artifacts"]]  # type: ignore[index]
    assert any("capture.tar.gz" in n for n in names), names


def test_duplicate_upload_points_at_the_first_run(server: str) -> None:
    first = upload(server, str(TINY))
    again = upload(server, str(TINY))
    assert first.returncode == again.returncode == 0
    assert again.stdout.strip() == first.stdout.strip()
    assert "already uploaded" in again.stderr


def test_missing_token_fails_with_the_server_message(server: str) -> None:
    proc = upload(server, str(TINY), token=None)
    assert proc.returncode == 2
    assert "upload refused" in proc.stderr and "unauthorized" in proc.stderr.lower()


def test_failed_ingest_exits_non_zero_with_the_reason(server: str, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", "name": ')
    proc = upload(server, str(bad))
    assert proc.returncode == 2
    assert "failed" in proc.stderr


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    proc = upload(f"127.0.0.1:{free_port()}", str(TINY))
    assert proc.returncode == 2
    assert "cannot upload to http://127.0.0.1:" in proc.stderr


def test_multipart_body_length_matches_what_is_streamed(tmp_path: Path) -> None:
    f = tmp_path / 'we"ird.json'
    f.write_bytes(b"x" * 3_000_000)
    body = MultipartBody({"name": "n", "tags": "a,b"}, [UploadPart(f.name, f), UploadPart("tiny.json", TINY)])
    seen: list[int] = []
    data = b"".join(body.iter_bytes(seen.append))
    assert len(data) == len(body) == sum(seen)
    assert data.endswith(f"--{body.boundary}--\r\n".encode())
    assert b'filename="we%22ird.json"' in data
    assert normalize_server("host:8000/") == "http://host:8000"
