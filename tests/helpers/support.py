"""Helpers shared by tests that run the real command line, a real server or a bench script (no fixtures here)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """A script of bench/ imported as a module (its own imports of its sibling scripts resolve while it loads)."""
    import importlib

    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def cli(*args: str) -> list[str]:
    """The `trace-explorer` console script of this environment, with arguments."""
    script = Path(sys.executable).with_name("trace-explorer")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "from api.launch import main; main()", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shift_drag(page: Any, y: float, x0: float, x1: float) -> None:
    """A shift+drag across the timeline at height y (page coordinates): the range measure."""
    page.keyboard.down("Shift")
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")


def wait_healthy(base: str, timeout_s: float = 30) -> None:
    """Until the server at `base` answers its health check (AssertionError after timeout_s)."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base}/-/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the server at {base} did not start"
        time.sleep(0.1)


@contextmanager
def serve_subprocess(data_dir: Path, *args: str, env: dict[str, str] | None = None,
                     ) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`trace-explorer serve` in a subprocess on a free port, once its health check answers: (URL, process)."""

    port = free_port()
    cmd = [sys.executable, "-c", "from api.launch import main; main()", "serve", "--port", str(port),
           "--data-dir", str(data_dir), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


# Packages a runtime install must not need: torch, CUDA's libraries, the team extra's (tests/project/test_install_split.py,
# tests/project/test_package.py).
EXTRAS = ("torch", "triton", "nvidia", "psycopg", "procrastinate", "s3fs", "botocore", "aiobotocore", "mcp")
# Python source that makes the packages named in $TE_BLOCK (comma-separated) unimportable in the process running it.
IMPORT_BLOCKER = '''"""With TE_BLOCK set, the packages it names cannot be imported (a test of what an install needs)."""
import importlib.abc
import os
import sys

BLOCKED = tuple(n for n in os.environ.get("TE_BLOCK", "").split(",") if n)


class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, Blocked())
'''
