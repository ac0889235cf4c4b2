"""The fuzz tests' figures reach the terminal without `-s`: tests add sections here, printed in pytest's
terminal summary (tests/conftest.py's hooks); with SCREENSHOT_DIR set (CI), the figures also go to
$SCREENSHOT_DIR/../fuzz.json. Under pytest-xdist (`make test` runs two workers) each worker hands its
sections to the controller as it ends, which prints and writes them all."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FUZZ_REPORT: dict[str, Any] = {}  # section -> {"text": str, "figures": dict}
WORKER_KEY = "fuzz_report"  # the key of a worker's sections in its workeroutput


def report(section: str, text: str, figures: dict[str, Any]) -> None:
    FUZZ_REPORT[section] = {"text": text, "figures": figures}
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's sections are written by the controller
        write_figures()


def write_figures() -> None:
    shots = os.environ.get("SCREENSHOT_DIR")
    if shots and FUZZ_REPORT:
        target = Path(shots).parent / "fuzz.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({k: v["figures"] for k, v in FUZZ_REPORT.items()}, indent=1))


def hand_over(workeroutput: dict[str, Any]) -> None:
    """On a worker, as its session ends: its sections for the controller."""
    if FUZZ_REPORT:
        workeroutput[WORKER_KEY] = json.dumps(FUZZ_REPORT)


def take_over(workeroutput: dict[str, Any]) -> None:
    """On the controller, as a worker ends: its sections join this process's."""
    sections = workeroutput.get(WORKER_KEY)
    if sections:
        FUZZ_REPORT.update(json.loads(sections))
        write_figures()
