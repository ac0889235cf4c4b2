"""Helpers shared by tests that run the real command line or a real server (no fixtures here)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any


def cli(*args: str) -> list[str]:
    """The `trace-explorer` console script of this environment, with arguments."""
    script = Path(sys.executable).with_name("trace-explorer")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "from api.cli import main; main()", *args]


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
