"""The command line starts light: `trace-explorer --version` and `--help` (and every command's --help) import no
library the command does not use. A test of what is imported, not of time (the time is in docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pydantic", "pydantic_settings", "pyarrow", "numpy", "sqlalchemy", "duckdb", "fastapi", "uvicorn", "torch",
         "plotly", "jinja2", "msgspec")


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["ops", "--help"], ["serve", "--help"],
                                  ["ingest", "--help"], ["check", "--help"],
                                  ["mcp", "--help"], ["kernels", "--help"]], ids=" ".join)
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    code = ("import sys\nfrom api.launch import main\nsys.argv = ['trace-explorer', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout, done.stdout[-500:]
