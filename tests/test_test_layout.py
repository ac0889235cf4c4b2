"""A module's test can be found by its name (issue 35): a unit test mirrors its module, and a level folder says
why not (tests/README.md). Every tests/**/test_*.py outside the level folders maps to an existing module, and
the count of modules with a mirrored test file may only grow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

# Where a test file's path leads: tests/<path>/test_<m>.py mirrors <source>/<path>/<m><suffix>.
MIRRORS = {"": ("explorer", ".py"), "api": ("api", ".py"), "bench": ("bench", ".py"), "js": ("static/js", ".js")}

# Folders whose tests are not unit tests of one module, each with the reason (tests/README.md lists the same).
LEVELS = {
    "api": "HTTP-level tests through the app, across routes",
    "e2e": "the browser (Playwright and chromium)",
    "fuzz": "generated and mutated input against the ingest and the API",
    "team": "the team server as real processes",
    "truth": "the truth harness: numbers read from trace files by an independent reader",
    "ranks": "one real multi-rank capture read by ingest, analysis, pages and API together",
    "project": "the repository as shipped: packaging, install, deploy files, CI",
    "helpers": "shared test code, no tests",
}

# Suite-wide checks at the root, each reading the whole code base or the docs rather than one module.
SUITE_CHECKS = {"test_layering.py", "test_page_twins.py", "test_readme.py", "test_docstrings.py",
                "test_test_layout.py"}

# Modules with a mirrored test file, at least (explorer/, api/): raise it when you add one, never lower it.
FLOOR = {"explorer": 86, "api": 21}


def source_modules(package: str) -> list[Path]:
    """A package's modules, less package markers and the migration scripts (Alembic runs those, not tests)."""
    return sorted(p for p in (ROOT / package).rglob("*.py")
                  if p.name != "__init__.py" and "migrations" not in p.parts and "__pycache__" not in p.parts)


def all_test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def mirrored(test: Path) -> Path | None:
    """The module a test file mirrors: test_<m>.py, test_<m>_<aspect>.py (a module's tests split by aspect), or
    any test file in a folder named after the module (<m>/test_<aspect>.py, its tests sharing a conftest.py)."""
    parts = test.relative_to(TESTS).parts
    mirror = parts[0] if len(parts) > 1 and parts[0] in MIRRORS else ""
    source, suffix = MIRRORS[mirror]
    folder = ROOT / source / Path(*parts[1 if mirror else 0:-1])
    stem = test.stem.removeprefix("test_")
    words = stem.split("_")
    for n in range(len(words), 0, -1):  # the longest name first: test_device_rows.py is device_rows's, not device's
        module = folder / ("_".join(words[:n]) + suffix)
        if module.is_file():
            return module
    module = folder.with_suffix(suffix)
    return module if module.is_file() and not folder.is_dir() else None


def level(test: Path) -> str | None:
    parts = test.relative_to(TESTS).parts
    if len(parts) == 1:
        return "suite" if test.name in SUITE_CHECKS else None
    return parts[0] if parts[0] in LEVELS else None


def coverage() -> dict[str, tuple[int, int]]:
    """Per package: (modules with at least one test file whose path maps to them, modules)."""
    found = {m for t in all_test_files() if (m := mirrored(t)) is not None}
    return {package: (sum(m in found for m in source_modules(package)), len(source_modules(package)))
            for package in FLOOR}


def test_every_test_file_mirrors_a_module_or_sits_in_a_level_folder() -> None:
    stray = [str(t.relative_to(ROOT)) for t in all_test_files() if mirrored(t) is None and level(t) is None]
    assert not stray, ("these test files mirror no module: name them tests/<pkg>/test_<module>[_<aspect>].py, "
                       f"or put them in a level folder (tests/README.md): {stray}")


def test_the_tests_root_holds_only_tests_and_conftest() -> None:
    loose = sorted(p.name for p in TESTS.glob("*.py") if p.name != "conftest.py" and not p.name.startswith("test_"))
    assert not loose, f"shared test code goes to tests/helpers/: {loose}"


def test_helpers_hold_no_tests() -> None:
    assert not list((TESTS / "helpers").rglob("test_*.py"))


def test_mirrored_modules_do_not_drop(capsys: pytest.CaptureFixture[str]) -> None:
    counts = coverage()
    with capsys.disabled():
        print("\nmodules with a mirrored test file: "
              + ", ".join(f"{package} {have} of {total}" for package, (have, total) in counts.items()))
    for package, (have, _) in counts.items():
        assert have >= FLOOR[package], f"{package}: {have} modules with a mirrored test file, floor {FLOOR[package]}"


def test_the_readme_names_the_level_folders() -> None:
    named = set(re.findall(r"^- `tests/([a-z0-9_]+)/`", (TESTS / "README.md").read_text(), re.MULTILINE))
    assert named == set(LEVELS)


@pytest.mark.parametrize(("test", "module"), [
    ("test_theme.py", "explorer/theme.py"),
    ("analysis/timeline/test_layout.py", "explorer/analysis/timeline/layout.py"),
    ("analysis/test_check_rules.py", "explorer/analysis/check.py"),
    ("analysis/collectives/test_real.py", "explorer/analysis/collectives.py"),
    ("runs/jobs/test_queue.py", "explorer/runs/jobs/queue.py"),
    ("api/test_errors.py", "api/errors.py"),
    ("js/test_tracks.py", "static/js/tracks.js"),
    ("bench/test_peers.py", "bench/peers.py"),
    ("test_nothing_here.py", None),
    ("analysis/test_runs.py", None),
])
def test_mapping(test: str, module: str | None) -> None:
    assert mirrored(TESTS / test) == (None if module is None else ROOT / module)
