"""A full disk is a clear error, not a traceback, a 500 or "this is a bug": the message names the folder and the
space free and needed, nothing of the ingest or upload is left, the server's answer is 507. The data folder is a
small tmpfs the test mounts (root, `mount -t tmpfs`); where it cannot, the tests skip and say why."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.store.runs import RunStore
from tests.api.conftest import TINY, assert_error
from tests.helpers.support import cli

TMPFS_MB = 16


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A TMPFS_MB tmpfs at a fresh folder, unmounted afterwards."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False) if shutil.which("mount") else None
    if done is None or done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount): {done.stderr.strip() if done else 'no mount'}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def big_gzip_trace(path: Path, events: int) -> Path:
    """A gzip trace of `events` slices: a few MB compressed, far more once decompressed into the scratch folder."""
    with gzip.open(path, "wt", compresslevel=6) as f:
        f.write('{"traceEvents": [')
        f.write(",".join(json.dumps({"ph": "X", "cat": "cpu_op", "name": f"aten::op_{i % 97}", "pid": 1, "tid": i % 4,
                                     "ts": i * 3, "dur": 2, "args": {"pad": "p" * 40}}) for i in range(events)))
        f.write("]}")
    return path


def test_cli_ingest_that_fills_the_disk_is_a_clear_error_and_leaves_nothing(small_disk: Path, tmp_path: Path) -> None:
    trace = big_gzip_trace(tmp_path / "big.json.gz", 400_000)  # ~60 MB decompressed, beyond the 16 MB tmpfs
    data = small_disk / "data"
    done = subprocess.run(cli("ingest", str(trace), "--data-dir", str(data)), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "bug" not in done.stderr
    assert "no space left in" in done.stderr and str(data / "tmp") in done.stderr and "free now" in done.stderr
    assert list((data / "tmp").iterdir()) == []
    runs = subprocess.run(cli("runs", "--json", "--data-dir", str(data)), capture_output=True, text=True, timeout=120)
    assert [r["status"] for r in json.loads(runs.stdout)] in ([], ["failed"])  # the CLI keeps no failed run


def test_ingest_that_fills_the_disk_marks_its_run_failed(small_disk: Path, tmp_path: Path) -> None:
    """The server's way (keep_failed): the run stays, failed, with the message; not 'this is a bug'."""
    from explorer.errors import DiskFull
    from explorer.runs.ingest import ingest_paths

    trace = big_gzip_trace(tmp_path / "big.json.gz", 400_000)
    store = RunStore(small_disk / "data")
    with pytest.raises(DiskFull) as caught:
        ingest_paths(store, [trace], keep_failed=True)
    run = store.catalog.list()[0][0]
    assert run.status == "failed" and run.message == caught.value.message and "no space left" in run.message
    assert caught.value.detail["needed_bytes"] == trace.stat().st_size
    assert list(store.tmp_dir.iterdir()) == []


def test_an_upload_that_fills_the_disk_is_507_and_leaves_nothing(small_disk: Path) -> None:
    settings = Settings(data_dir=small_disk / "data")
    payload = b"x" * ((TMPFS_MB + 1) * 2**20)  # more than the whole disk, even with no catalog on it (PostgreSQL)
    boundary = "b" * 20
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.json\"\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def chunked() -> Iterator[bytes]:  # no Content-Length: the disk fills while the body streams
        yield head
        for i in range(0, len(payload), 2**20):
            yield payload[i:i + 2**20]
        yield tail

    with TestClient(create_app(settings)) as client:
        ctype = {"content-type": f"multipart/form-data; boundary={boundary}"}
        body = assert_error(client.post("/api/runs", content=chunked(), headers=ctype), 507, "disk_full")
        assert str(settings.data_dir / "tmp") in body["error"]["message"]
        assert list((settings.data_dir / "tmp").iterdir()) == []
        # with its length declared it is refused before a byte is written
        whole = head + payload + tail
        body = assert_error(client.post("/api/runs", content=whole, headers=ctype), 507, "disk_full")
        assert body["error"]["detail"]["needed_bytes"] > len(whole)
        assert client.get("/api/runs").json()["total"] == 0
        r = client.post("/api/runs", files={"files": (TINY.name, TINY.read_bytes())})  # room for a small one
        assert r.status_code in (200, 202), r.text
