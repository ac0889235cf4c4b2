"""Without the `mcp` extra the runtime install is unchanged: the server starts with no /mcp (a 404, as any unknown
path), and `trace-explorer mcp` says which extra to install, in one line, without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.support import IMPORT_BLOCKER

ROOT = Path(__file__).resolve().parents[3]


def without_mcp(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", IMPORT_BLOCKER + code], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                                             "TE_BLOCK": "mcp"})


def test_the_server_runs_without_the_extra_and_has_no_mcp_path(tmp_path: Path) -> None:
    done = without_mcp(f"""
from fastapi.testclient import TestClient
from api.app import create_app
from explorer.config import Settings
with TestClient(create_app(Settings(data_dir={str(tmp_path / 'data')!r})), base_url="http://127.0.0.1") as c:
    print("STATUS", c.get("/api/runs").status_code, c.post("/mcp", json={{}}).status_code)
print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] == "mcp"))
""", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "STATUS 200 404" in done.stdout and "LOADED []" in done.stdout


def test_the_mcp_command_names_the_extra(tmp_path: Path) -> None:
    done = without_mcp("from api.launch import main\nsys.argv = ['trace-explorer', 'mcp', '--data-dir', 'd']\nmain()",
                       tmp_path)
    assert done.returncode == 1
    assert "trace-explorer mcp needs the 'mcp' extra" in done.stderr and "pip install 'trace-explorer[mcp]'" in \
        done.stderr
    assert "Traceback" not in done.stderr
