"""Module docstrings say what a module is for in a few lines and quote no measurement (issue 35): figures go
stale in code, so they live in docs/benchmarks.md, and rules too long for a docstring in the docs pages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("explorer", "api")
MAX_LINES = 5

# A number followed by a unit of time, size, ratio or share, or a count of benchmark rounds: what a measurement
# looks like. Format facts pass: "schema 7.4", "int64 ns" (no number before the unit), "a 1,024-byte header",
# "(413, 400, 401)". A limit defined in code is named, not quoted ("under SMALL_DMA_BYTES").
_NUMBER = r"(?<![\w.])\d[\d,_]*(?:\.\d+)?"
_UNIT = (
    r"(?:(?:s|ms|µs|us|ns|secs?|seconds?|minutes?|min|hours?|h|[KMGT]i?B|kB|bytes)\b"
    r"|[x×](?!\w)|%|rounds?\b|times\b)"
)
FIGURE = re.compile(
    rf"{_NUMBER}\s*{_UNIT}|\bmeasured\s+(?:(?:on|with|in)\s+(?:the|a|an|\d)|alternating)", re.IGNORECASE
)


def modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True)


def test_every_package_has_modules() -> None:
    found = {path.relative_to(ROOT).parts[0] for path in modules()}
    assert found == set(PACKAGES)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_docstring_is_short_and_quotes_no_figure(path: Path) -> None:
    text = docstring(path)
    assert text, f"{path.relative_to(ROOT)} has no module docstring"
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES, (
        f"{path.relative_to(ROOT)}: module docstring of {len(lines)} lines (at most {MAX_LINES}: what and why; "
        "rules to docs/architecture.md or the page they belong to)"
    )
    figures = [match.group(0) for match in FIGURE.finditer(text)]
    assert not figures, (
        f"{path.relative_to(ROOT)}: module docstring quotes {figures} (move to docs/benchmarks.md)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "the 1M-event file 3.81 -> 2.79 s",
        "~250 MiB more than its live arrays",
        "threads 4.25 s, processes 4.61 s",
        "Children start in ~50 ms each",
        "a speed-up of 5.2x over HTA",
        "2.1× faster",
        "40 % of the benchmark",
        "8 rounds each",
        "~0.15 s and ~11 MiB spared",
        "built 4-12 GB in the server",
        "~220 bytes a slice",
        "transfers under 4 KiB",
        "Measured on the 2-core box",
        "measured with a 3M-event upload",
        "each 12 us",
    ],
)
def test_figure_pattern_catches_measurements(text: str) -> None:
    assert FIGURE.search(text), text


@pytest.mark.parametrize(
    "text",
    [
        "PROFILE_SCHEMA.md's (schema 7.4); times are int64 ns in the profile's clock",
        "read from its 1,024-byte header (a little-endian packaging version 1 or 2)",
        "a response sent before its body was read (413, 400, 401)",
        "read as DECIMAL(38,3) µs, whose unscaled integers are the ns counts",
        "range-checked to 0 <= ns < MAX_TS_NS",
        "each rank's `ProfilerStep#7`",
        "its gap is measured from that one",
        "the threshold and what it is measured on. Wording of the advice",
        "transfers under SMALL_DMA_BYTES flagged small",
    ],
)
def test_figure_pattern_allows_format_facts(text: str) -> None:
    assert not FIGURE.search(text), FIGURE.search(text)


POINTER = re.compile(r'\b(docs/[\w.-]+\.md)(?:,\s+"([^"]+)")?')


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docstring_pointers_resolve(path: Path) -> None:
    """A pointer such as `docs/architecture.md, "native/memory.py"` names a page that exists and, when it names
    a section, a heading or a bold item of that page (where the moved text now lives)."""
    text = " ".join((docstring(path) or "").split())
    for page, section in POINTER.findall(text):
        target = ROOT / page
        assert target.is_file(), f"{path.relative_to(ROOT)} points at {page}, which does not exist"
        if section:
            body = target.read_text(encoding="utf-8")
            heading = re.search(rf"^#+ .*{re.escape(section)}", body, re.MULTILINE)
            assert heading or f"**{section}" in body, f"{path.relative_to(ROOT)}: no {section!r} in {page}"
