"""api/mcp/bounds.py: the row and character bounds, the cut texts, the `*_human` twins, each cut said."""

from __future__ import annotations

import json

import pytest

from api.mcp.bounds import CLOCK_NS, MAX_TEXT, SCALARS, bounded, dumps


def test_lists_are_cut_to_the_rows_and_the_cut_is_said() -> None:
    rows = [{"i": i} for i in range(50)]
    out = bounded({"rows": rows, "inner": {"more": rows[:3]}, "dims": [1, 2, 3]}, 2, 100_000, "q=")
    assert out["rows"] == rows[:2] and out["inner"]["more"] == rows[:2] and out["dims"] == [1, 2, 3]
    assert out["truncated"] == ["truncated, 48 more in rows (2 of 50 shown) — narrow with q=, or raise limit",
                                "truncated, 1 more in inner.more (2 of 3 shown) — narrow with q=, or raise limit"]
    values = bounded({"ranks": list(range(40))}, 2, 100_000, "q=")
    assert values["ranks"] == list(range(SCALARS)) and values["truncated"][0].startswith("truncated, 24 more in ranks")


def test_the_answer_is_cut_further_until_its_text_fits() -> None:
    rows = [{"name": f"op{i:03d}", "dur_ns": i} for i in range(200)]
    out = bounded({"rows": rows}, 200, 2_000, "q=")
    text = dumps(out)
    assert len(text) <= 2_000
    shown = len(out["rows"])
    assert 0 < shown < 200 and out["rows"] == [{"name": f"op{i:03d}", "dur_ns": i, "dur_human": f"{i} ns"}
                                               for i in range(shown)]
    assert out["truncated"][0].startswith(f"truncated, {200 - shown:,} more in rows ({shown} of 200 shown)")
    assert json.loads(text) == out


def test_long_texts_are_cut_and_counted() -> None:
    out = bounded({"name": "k" * (MAX_TEXT + 10), "short": "<b>x</b>"}, 5, 100_000, "q=")
    assert out["name"] == "k" * MAX_TEXT + "… [10 more characters]"
    assert out["short"] == "<b>x</b>"  # text, not markup: kept as it is
    assert out["truncated"] == [f"truncated, 1 texts cut at {MAX_TEXT} characters"]


@pytest.mark.parametrize(("ns", "human"), [(0, "0 ns"), (1_500, "1.500 µs"), (-2_000_000, "-2.000 ms"),
                                           (3_000_000_000, "3.000 s"), (CLOCK_NS, None), (True, None)])
def test_durations_get_a_human_twin_clock_readings_do_not(ns: int, human: str | None) -> None:
    out = bounded({"x_ns": ns}, 5, 100_000, "q=")
    assert out.get("x_human") == human and out["x_ns"] == ns


def test_an_answer_too_large_even_without_rows_says_so() -> None:
    out = bounded({"a": "x" * MAX_TEXT, "b": "y" * MAX_TEXT, "c": "z" * MAX_TEXT, "rows": [1, 2]}, 5, 1_000, "q=")
    assert list(out) == ["truncated"] and "even with no rows" in out["truncated"][0]
