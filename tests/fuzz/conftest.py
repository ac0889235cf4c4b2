"""The fuzz tests' figures: see tests/fuzz/report.py (printed by tests/conftest.py's summary hook)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fuzz.report import report


@pytest.fixture(scope="session")
def fuzz_report() -> Any:
    return report
