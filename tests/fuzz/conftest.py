"""The fuzz tests' figures reach the terminal without `-s`: tests add lines to FUZZ_REPORT, printed in the
terminal summary; with SCREENSHOT_DIR set (CI), the figures also go to $SCREENSHOT_DIR/../fuzz.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

FUZZ_REPORT: dict[str, Any] = {}  # section -> {"text": str, "figures": dict}


def report(section: str, text: str, figures: dict[str, Any]) -> None:
    FUZZ_REPORT[section] = {"text": text, "figures": figures}
    shots = os.environ.get("SCREENSHOT_DIR")
    if shots:
        target = Path(shots).parent / "fuzz.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({k: v["figures"] for k, v in FUZZ_REPORT.items()}, indent=1))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FUZZ_REPORT:
        terminalreporter.section("fuzz figures")
        for entry in FUZZ_REPORT.values():
            terminalreporter.write_line(entry["text"])


@pytest.fixture(scope="session")
def fuzz_report() -> Any:
    return report
