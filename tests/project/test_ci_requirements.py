"""What CI requires cannot skip silently: under REQUIRE_NODE / REQUIRE_SHARED (set by `make test`, like
REQUIRE_BROWSER) a test skipped for want of node or of ../shared/traces fails (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, required_skip


@pytest.mark.parametrize(("reason", "environ", "expected"), [
    ("node is not installed", {"REQUIRE_NODE": "1"}, "REQUIRE_NODE"),
    ("node is not installed", {}, None),
    ("node is not installed", {"REQUIRE_SHARED": "1"}, None),
    ("../shared/traces is absent (only present beside the project's own checkout)", {"REQUIRE_SHARED": "1"},
     "REQUIRE_SHARED"),
    ("the shared real traces are not here", {"REQUIRE_SHARED": "1", "REQUIRE_NODE": "1"}, "REQUIRE_SHARED"),
    ("../shared/traces is absent", {"REQUIRE_SHARED": ""}, None),
    ("TRUTH_CORPUS names no folder of traces", {"REQUIRE_SHARED": "1", "REQUIRE_NODE": "1"}, None),
])
def test_which_skips_are_forbidden(reason: str, environ: dict[str, str], expected: str | None) -> None:
    assert required_skip(reason, environ) == expected


def test_a_forbidden_skip_fails_the_run(tmp_path: Path) -> None:
    """A real pytest session over a test file: the skip that REQUIRE_SHARED forbids is a failure, others stay."""
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n"
        "def test_shared():\n    pytest.skip('../shared/traces is absent')\n"
        "def test_other():\n    pytest.skip('no torch.compile here')\n")
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    assert "def pytest_runtest_makereport" in conftest
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "--rootdir", str(ROOT), "--confcutdir", str(ROOT / "tests"), "-c", str(ROOT / "pyproject.toml"),
                          str(tmp_path / "test_skips.py"), "-p", "tests.conftest"],
                         capture_output=True, text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "REQUIRE_SHARED": "1", "COLUMNS": "300",
                                                                       "PYTHONPATH": str(ROOT)}, timeout=120)
    assert "1 failed, 1 skipped" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    assert "test_shared - REQUIRE_SHARED=1 forbids this skip: ../shared/traces is absent" in run.stdout


def test_make_test_sets_both_in_each_half() -> None:
    makefile = (ROOT / "Makefile").read_text()
    runs = [line for line in makefile.splitlines() if "REQUIRE_NODE=$(REQUIRE_NODE)" in line]
    assert len(runs) == 2 and all("REQUIRE_SHARED=$(REQUIRE_SHARED)" in line for line in runs)
    assert "REQUIRE_NODE ?= 1" in makefile
