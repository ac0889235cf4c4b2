"""The regression gate's rules (explorer/analysis/check.py), table-driven: thresholds written as text, the
verdict at and around the threshold, default metrics, names absent from a run."""

from __future__ import annotations

from fractions import Fraction

import pytest

from explorer.analysis.check import CheckSide, compute_check, parse_threshold
from explorer.errors import BadRequest


@pytest.mark.parametrize(("text", "value"), [("5%", Fraction(1, 20)), ("0.05", Fraction(1, 20)),
                                              ("12.5 %", Fraction(1, 8)), ("0", Fraction(0)), ("1", Fraction(1))])
def test_thresholds(text: str, value: Fraction) -> None:
    assert parse_threshold(text) == value


@pytest.mark.parametrize("text", ["5", "-5%", "five", "", "5%%", "0x5"])
def test_bad_thresholds(text: str) -> None:
    with pytest.raises(BadRequest):
        parse_threshold(text)


def side(run_id: str, device: int = 0, cpu: int = 0, step: tuple[int, int] | None = None,
         **kernels: int) -> CheckSide:
    return CheckSide(run_id, run_id, device, cpu, step, kernel_ns=kernels)


@pytest.mark.parametrize(("base", "cand", "metrics", "expected"), [
    (side("a", 1000), side("b", 1050), [], [("device_total", 50, "ok")]),  # exactly 5%: not over it
    (side("a", 1000), side("b", 1051), [], [("device_total", 51, "regression")]),
    (side("a", 1000), side("b", 949), [], [("device_total", -51, "improvement")]),
    (side("a", 0, 100, (4, 400)), side("b", 0, 90, (4, 480)), [],
     [("cpu_total", -10, "improvement"), ("step_time", 20, "regression")]),
    (side("a", 10, k=100), side("b", 10, k=0), ["kernel:k"], [("kernel:k", -100, "improvement")]),
    (side("a", 10), side("b", 10, k=7), ["kernel:k"], [("kernel:k", 7, "regression")]),  # new from nothing
])
def test_verdicts(base: CheckSide, cand: CheckSide, metrics: list[str],
                  expected: list[tuple[str, int, str]]) -> None:
    result = compute_check(base, cand, metrics, Fraction(1, 20))
    assert [(r["metric"], r["delta_ns"], r["verdict"]) for r in result["rows"]] == expected
    assert result["passed"] is (not any(v == "regression" for _, _, v in expected))


def test_step_time_needs_steps() -> None:
    with pytest.raises(BadRequest, match="no ProfilerStep"):
        compute_check(side("a", 1, step=(1, 5)), side("b", 1), ["step_time"], Fraction(0))


def test_a_name_in_neither_run_is_an_error_not_a_pass() -> None:
    with pytest.raises(BadRequest, match="no device execution named 'kk'"):
        compute_check(side("a", 1, k=1), side("b", 1, k=2), ["kernel:kk"], Fraction(0))
