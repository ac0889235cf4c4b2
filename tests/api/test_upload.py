"""Uploads: streamed to disk with a size limit, archives and many files, duplicates by sha256,
malformed traces that fail cleanly, and file names that cannot escape the upload folder."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.upload import safe_filename, safe_relpath
from explorer.config import Settings
from tests.api.conftest import TINY, Uploader, assert_error, wait_until_done


def test_oversized_upload_is_413_and_leaves_nothing(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", max_upload_bytes=1000)
    with TestClient(create_app(settings)) as client:
        r = client.post("/api/runs", files={"files": ("big.json", b"x" * 5000)})
        body = assert_error(r, 413, "too_large")
        assert body["error"]["detail"] == {"limit_bytes": 1000}
        assert client.get("/api/runs").json()["total"] == 0
        assert list((settings.data_dir / "tmp").iterdir()) == []


def test_size_limit_counts_all_files_together(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", max_upload_bytes=6000)
    with TestClient(create_app(settings)) as client:
        parts = [("files", (f"{i}.json", b"y" * 2500)) for i in range(3)]
        assert_error(client.post("/api/runs", files=parts), 413, "too_large")


def test_malformed_trace_fails_with_message_and_server_keeps_serving(client: TestClient,
                                                                     upload: Uploader) -> None:
    for name, data in [("bad.json", b'{"traceEvents": [{"ph": "X", "ts": '), ("empty.json", b""),
                       ("junk.bin", b"\x00\x01 not a trace")]:
        run = upload(files=[(name, data)])
        assert run["status"] == "failed" and run["message"], run
        assert_error(client.get(f"/api/runs/{run['id']}/timeline"), 409, "run_not_ready")
    assert client.get("/-/health").status_code == 200
    assert upload()["status"] == "ready"


def test_duplicate_upload_is_recognized(client: TestClient, upload: Uploader) -> None:
    first = upload()
    r = client.post("/api/runs", files={"files": ("other-name.json", TINY.read_bytes())})
    assert r.status_code == 200
    assert r.json()["duplicate_of"] == first["id"] and r.json()["id"] == first["id"]
    assert client.get("/api/runs").json()["total"] == 1


def test_gzip_zip_and_many_files(client: TestClient, upload: Uploader) -> None:
    assert upload(files=[("t.json.gz", gzip.compress(TINY.read_bytes()))])["summary"]["slices"] == 12
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("capture/rank0.json", TINY.read_bytes().replace(b"Fake GPU", b"GPU zip"))
    assert upload(files=[("capture.zip", buf.getvalue())])["status"] == "ready"
    two = upload(files=[("a.json", TINY.read_bytes().replace(b"Fake GPU", b"A")),
                        ("b.json", TINY.read_bytes().replace(b"Fake GPU", b"B"))])
    assert two["status"] == "ready" and two["summary"]["slices"] == 24
    assert [a["name"] for a in two["summary"]["artifacts"]] == ["a.json", "b.json"]


def test_hostile_file_names_stay_inside(client: TestClient, settings: Settings) -> None:
    r = client.post("/api/runs", files={"files": ("../../../../evil.json", TINY.read_bytes())})
    run = wait_until_done(client, r.json()["id"])
    assert run["status"] == "ready" and run["summary"]["artifacts"][0]["name"] == "evil.json"
    assert not (settings.data_dir.parent / "evil.json").exists()


@pytest.mark.parametrize("given, safe", [
    ("../../etc/passwd", "passwd"), ("..\\..\\x.json", "x.json"), ("..", "upload"), ("", "upload"),
    (".hidden", "hidden"), ("a b<script>.json", "a_b_script_.json"), ("/abs/path.json.gz", "path.json.gz"),
    ("训练 步骤.json", "训练_步骤.json"), ("e\u0301.json", "\u00e9.json"), ("tab\there\u200b.json", "tab_here_.json"),
])
def test_safe_filename(given: str, safe: str) -> None:
    assert safe_filename(given) == safe


def test_not_multipart_is_400(client: TestClient) -> None:
    assert_error(client.post("/api/runs", content=b"{}", headers={"content-type": "application/json"}),
                 400, "bad_request")
    assert_error(client.post("/api/runs", data={"name": "no files"}, files={"x": ("", b"")}), 400, "bad_request")


def test_delete_while_ingesting_is_refused(client: TestClient, settings: Settings) -> None:
    rec = client.app.state.explorer.store.catalog.create("pending")  # type: ignore[attr-defined]
    assert_error(client.delete(f"/api/runs/{rec.id}"), 409, "run_not_ready")


CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "neuron" / "capture_two_procs"


def test_dropped_folder_keeps_its_layout_so_a_capture_joins(client: TestClient, upload: Uploader,
                                                            settings: Settings) -> None:
    """A browser sends a dropped folder's files with relative names; the capture layout
    (<instance>_pid_<pid>/<timestamp>/...) must survive so each process folder is joined."""
    files = [(f"capture_two_procs/{p.relative_to(CAPTURE).as_posix()}", p.read_bytes())
             for p in sorted(CAPTURE.rglob("*")) if p.is_file()]
    files.append(("../../outside/../../x.json", TINY.read_bytes()))
    run = upload(files=files)
    assert run["status"] == "ready", run
    names = [a["name"] for a in run["summary"]["artifacts"]]
    assert "capture_two_procs/i-0123456789abcdef0_pid_1001/20250601T120000Z/trace.json" in names
    assert "outside/x.json" in names
    warnings = " ".join(w["message"] for w in run["summary"]["warnings"])
    assert "neuron-explorer view" in warnings
    tracks = client.get(f"/api/runs/{run['id']}/tracks").json()["tracks"]
    hardware = {t["process"] for t in tracks if t["lane"] == "hardware"}
    assert any("1001" in p for p in hardware) and any("1002" in p for p in hardware), hardware
    assert not (settings.data_dir.parent / "outside").exists() and not (settings.data_dir / "outside").exists()


@pytest.mark.parametrize("given, safe", [
    ("a/b/trace.json", "a/b/trace.json"), ("../../etc/passwd", "etc/passwd"), ("/abs/x.json", "abs/x.json"),
    ("a/./b\\..\\c.json", "a/b/c.json"), ("", "upload"), ("<script>/x y.json", "_script_/x_y.json"),
])
def test_safe_relpath(given: str, safe: str) -> None:
    assert safe_relpath(given).as_posix() == safe


def test_an_upload_and_an_ingest_of_the_same_files_agree_on_hash_and_name(client: TestClient, upload: Uploader,
                                                                          tmp_path: Path) -> None:
    """The upload's hash, streamed as it arrives, is the one `ingest` computes from the files on disk (so either
    finds the other's run), and both name an unnamed run the same way (explorer.runs.records)."""
    import hashlib

    from explorer.runs.records import content_sha256, default_run_name
    from explorer.store.runs import RunStore

    parts = [("rank1.pt.trace.json.gz", gzip.compress(TINY.read_bytes())), ("rank0.json", TINY.read_bytes())]
    run = upload(files=parts)
    folder = tmp_path / "same"
    folder.mkdir()
    paths = []
    for name, data in parts:
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    expected = hashlib.sha256("\n".join(sorted(hashlib.sha256(d).hexdigest() for _, d in parts)).encode()).hexdigest()
    assert content_sha256(paths) == expected
    record = RunStore(Path(client.app.state.explorer.settings.data_dir)).catalog.get(run["id"])  # type: ignore[attr-defined]
    assert record is not None and record.sha256 == expected
    assert run["name"] == default_run_name(paths) == "rank1.pt.trace (+1)"
    assert default_run_name([], "upload") == "upload"


def test_queued_bytes_counts_the_uploads_and_never_fails_on_one_that_vanishes(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The upload queue's size is read while other uploads' ingests remove their folders: a folder (or a file in
    it) gone mid-walk counts nothing; it used to raise FileNotFoundError out of the upload route (a flaky 500)."""
    from api import upload as upload_module

    (tmp_path / "upload-a" / "trees" / "run").mkdir(parents=True)
    (tmp_path / "upload-a" / "0000.json").write_bytes(b"x" * 100)
    (tmp_path / "upload-a" / "trees" / "run" / "rank0.json").write_bytes(b"y" * 50)
    (tmp_path / "ingest-r1").mkdir()
    (tmp_path / "ingest-r1" / "scratch").write_bytes(b"z" * 7)  # not an upload: not counted
    assert upload_module.queued_bytes(tmp_path) == 150
    real_glob = Path.glob

    def with_a_vanished_folder(self: Path, pattern: str) -> Any:
        yield from real_glob(self, pattern)
        yield self / "upload-gone"  # listed, then removed by its ingest before the walk reaches it

    monkeypatch.setattr(Path, "glob", with_a_vanished_folder)
    assert upload_module.queued_bytes(tmp_path) == 150
    monkeypatch.setattr(Path, "glob", real_glob)
    real_scandir = os.scandir

    def removed_as_it_is_reached(path: Any) -> Any:
        if str(path).endswith("trees"):  # the ingest removes the upload's tree just as the walk enters it
            shutil.rmtree(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", removed_as_it_is_reached)
    assert upload_module.queued_bytes(tmp_path) == 100
