"""The runtime install is what serving and ingesting need: no torch, no CUDA libraries, no team-server
libraries (the `team` extra). A child process in which those packages cannot be imported ingests, serves every
kind of page, and names the extra when a team setting asks for one."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.helpers.support import EXTRAS as ABSENT
from tests.helpers.support import IMPORT_BLOCKER

ROOT = Path(__file__).resolve().parents[2]


def run_without_extras(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", IMPORT_BLOCKER + f"ABSENT = {ABSENT!r}\n" + code],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                               "TE_BLOCK": ",".join(ABSENT)})


def test_runtime_dependencies_hold_no_torch_cuda_or_team_libraries() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower() for d in project["dependencies"]]
    assert not [n for n in names if n.startswith(ABSENT) or n.startswith("nvidia")], names
    team = project["optional-dependencies"]["team"]
    assert {t.split("[")[0].split(">")[0] for t in team} == {"psycopg", "procrastinate", "s3fs"}


def test_ingest_and_every_page_without_the_extras(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 1.0, "dur": 5.0,
         "args": {"External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2.0, "dur": 1.0,
         "args": {"correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3.0, "dur": 2.0,
         "args": {"correlation": 7, "External id": 1}}]}))
    code = f"""
from fastapi.testclient import TestClient
from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from pathlib import Path
app = create_app(Settings(data_dir=Path({str(tmp_path / 'data')!r})))
rid = ingest_paths(app.state.explorer.store, [Path({str(trace)!r})], "t").id
with TestClient(app, base_url="http://127.0.0.1") as c:
    for path in ("/", f"/runs/{{rid}}", f"/runs/{{rid}}/ops", f"/runs/{{rid}}/kernels", f"/runs/{{rid}}/timeline",
                 f"/runs/{{rid}}/steps", f"/api/runs/{{rid}}/ops", "/docs"):
        r = c.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ABSENT)
print("LOADED", loaded)
"""
    done = run_without_extras(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LOADED []" in done.stdout


def test_team_settings_name_the_extra(tmp_path: Path) -> None:
    code = """
from explorer.errors import MissingExtra
from explorer.store.catalog.db import make_engine
from explorer.store.storage import S3Storage
for make in (lambda: make_engine("postgresql://u@127.0.0.1:5432/test"), lambda: S3Storage("s3://bucket/p")):
    try:
        make()
    except MissingExtra as exc:
        print("MSG", exc.message)
"""
    done = run_without_extras(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    msgs = [line for line in done.stdout.splitlines() if line.startswith("MSG")]
    assert len(msgs) == 2, done.stdout
    assert all("'team' extra" in m and "pip install 'trace-explorer[team]'" in m for m in msgs), msgs
    assert "PostgreSQL catalog" in msgs[0] and "S3 run storage" in msgs[1]
