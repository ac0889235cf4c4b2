"""Neuron files that are no timeline: a NEFF + NTFF pair is a ready run that keeps them (never a failed row),
names the compiler version the NEFF header holds and the exact convert commands; `neuron-ls` JSON in a capture
is the run's device identity. Expected values are read here from the bytes (struct) and the JSON (json)."""

from __future__ import annotations

import json
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "neuron"
LS = FIXTURES / "neuron_ls"
CAPTURE = FIXTURES / "capture_two_procs" / "i-0123456789abcdef0_pid_1002"
VERSION = b"2.21.33363.0+82af5a53"


def neff_bytes(version: bytes) -> bytes:
    """A NEFF laid out as aws-neuron's KLR.NEFF.Header: packaging 1, header size 1024, the build version at 40."""
    header = struct.pack("<QQQQQ", 1, 1024, 10, 2, 20) + version.ljust(128, b"\x00")
    return header.ljust(1024, b"\x00") + b"\x1f\x8b\x08" + bytes(7)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    tmp = tmp_path_factory.mktemp("neuron_files")
    pair = tmp / "vector_add"
    pair.mkdir()
    (pair / "vector_add.neff").write_bytes(neff_bytes(VERSION))
    (pair / "vector_add.ntff").write_bytes(b"\x4e\x54\x46\x46\x02\x00" + bytes(range(256)) * 4)
    capture = tmp / "capture"
    shutil.copytree(CAPTURE, capture / CAPTURE.name)
    shutil.copy(LS / "neuron-ls_trn2.json", capture / "neuron-ls.json")
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    runs = {"pair": ingest_paths(store, [pair], "pair").id, "capture": ingest_paths(store, [capture], "cap").id,
            "legacy": ingest_paths(store, [LS / "neuron-ls_trn1.json"], "legacy").id}
    with TestClient(app) as client:
        yield client, runs, pair


def test_a_neff_ntff_pair_is_a_ready_run_not_a_failed_row(
        served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, pair = served
    listed = {r["id"]: r for r in client.get("/api/runs").json()["runs"]}
    assert listed[runs["pair"]]["status"] == "ready"
    summary = client.get(f"/api/runs/{runs['pair']}").json()["summary"]
    files = {f["name"]: f for f in summary["neuron_files"]}
    neff, ntff = files["vector_add/vector_add.neff"], files["vector_add/vector_add.ntff"]
    raw = (pair / "vector_add.neff").read_bytes()
    assert struct.unpack("<QQ", raw[:16]) == (1, 1024)
    assert neff["version"] == "neuronx-cc " + raw[40:168].rstrip(b"\x00").decode()
    assert ntff["version"] is None and neff["size"] == len(raw) and ntff["kind"] == "ntff"
    commands = [c["command"] for c in neff["commands"]]
    assert commands == [
        "neuron-explorer view -n vector_add.neff -s vector_add.ntff --output-format parquet "
        "--output-file vector_add_parquet",
        "neuron-profile view -n vector_add.neff -s vector_add.ntff --output-format summary-text > "
        "vector_add_summary.txt",
        "neuron-profile view -n vector_add.neff -s vector_add.ntff --output-format json --output-file "
        "vector_add.json"]
    assert sorted(a["name"] for a in summary["artifacts"]) == sorted(files)


def test_the_run_page_says_what_they_are_and_how_to_convert(
        served: tuple[TestClient, dict[str, str], Path]) -> None:
    client, runs, _ = served
    html = client.get(f"/runs/{runs['pair']}").text
    panel = re.search(r'<div class="panel" id="neuron-files".*?\n</div>', html, re.S)
    assert panel, "no Neuron files panel"
    text = panel.group(0)
    assert "NEFF: the compiled model" in text and "NTFF: the device trace" in text
    assert "neuronx-cc 2.21.33363.0+82af5a53" in text and "not stated (no published header)" in text
    assert "neuron-explorer view -n vector_add.neff -s vector_add.ntff --output-format parquet" in text


def expected_identity(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    devices = doc["neuron_devices"] if isinstance(doc, dict) else doc
    return {"name": doc.get("instance_type", "Neuron instance") if isinstance(doc, dict) else "Neuron instance",
            "neuron_devices": len(devices), "neuroncores": sum(d["nc_count"] for d in devices)}


@pytest.mark.parametrize(("run", "path"), [("capture", LS / "neuron-ls_trn2.json"),
                                           ("legacy", LS / "neuron-ls_trn1.json")])
def test_neuron_ls_is_the_runs_device_identity(served: tuple[TestClient, dict[str, str], Path], run: str,
                                               path: Path) -> None:
    client, runs, _ = served
    devices = client.get(f"/api/runs/{runs[run]}").json()["summary"]["devices"]
    ls = [d for d in devices if d["source"] == "neuron-ls"]
    want = expected_identity(path)
    assert [{k: d[k] for k in want} for d in ls] == [want]
    html = client.get(f"/runs/{runs[run]}").text
    pill = re.search(r'<span class="pill device" data-source="neuron-ls"[^>]*>(.*?)</span>', html)
    assert pill and pill.group(1) == (f"1 × {want['name']} · {want['neuron_devices']} Neuron devices · "
                                      f"{want['neuroncores']} NeuronCores")


@pytest.mark.parametrize("text", [
    b'{"traceEvents": [], "deviceProperties": [{"nc_count": 2, "neuron_device": 0, "instance_type": "x"}]}',
    b'[{"ph": "X", "name": "nc_count", "args": {"neuron_device": 0}}]' + b" " * 3000 + b'{"nc_count": 1}',
    b'{"nc_count": 2, "neuron_device": 0}',
])
def test_traces_that_mention_the_keys_are_not_neuron_ls(text: bytes) -> None:
    from explorer.ingest.detect import Format, detect_format

    assert detect_format(text) is not Format.NEURON_LS


@pytest.mark.parametrize("name", ["neuron-ls_trn1.json", "neuron-ls_trn2.json"])
def test_neuron_ls_is_detected_by_content(name: str) -> None:
    from explorer.ingest.detect import Format, detect_format

    assert detect_format((LS / name).read_bytes()) is Format.NEURON_LS
