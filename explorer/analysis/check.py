"""The regression gate: metric values of two runs -> rows with baseline, candidate, delta, % and a verdict.

Pure: the values come in as `CheckSide`s (explorer/views/check.py reads them from the store); which metrics
exist, what each one measures and how a threshold is written are here. No formatting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from explorer.analysis.compare import pct_change
from explorer.errors import BadRequest
from explorer.model.shapes import CheckResult, CheckRow

# metric -> what it measures (docs/cli.md "CI regression gate" repeats this table)
METRICS = {
    "device_total": "all device execution time of the run",
    "cpu_total": "host CPU time: the sum of self CPU over the operators view (the compare page's host metric)",
    "step_time": "mean ProfilerStep#N duration: the ProfilerStep* row's CPU total divided by its calls",
    "op:NAME": "the op's device total (its CPU total when neither run has device time), 0 where absent",
    "kernel:NAME": "total time of the device executions of that name, 0 where absent",
    "peak_memory": "the highest Total Allocated of any device in the run's [memory] events (bytes, in the *_ns "
                   "fields; unit: bytes)",
}
BYTE_METRICS = frozenset({"peak_memory"})
DEFAULT_MAX_REGRESSION = "5%"
_THRESHOLD = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<pct>%?)\s*$")


@dataclass
class CheckSide:
    """One run's numbers for the gate (ns). `step_ns`: ProfilerStep* (calls, CPU total), None without steps."""

    id: str
    name: str
    device_total_ns: int
    cpu_total_ns: int
    step: tuple[int, int] | None = None
    op_device_ns: Mapping[str, int] = field(default_factory=dict)
    op_cpu_ns: Mapping[str, int] = field(default_factory=dict)
    kernel_ns: Mapping[str, int] = field(default_factory=dict)
    peak_memory_bytes: int | None = None  # None: the run has no [memory] events


def parse_threshold(text: str) -> Fraction:
    """`5%` (a percentage) or `0.05` (a fraction, at most 1) -> Fraction(1, 20). Exact: decimal text,
    no binary float, so 5.00% of a baseline is exactly at the threshold (not over it)."""
    m = _THRESHOLD.match(text)
    if m is None:
        raise BadRequest(f"max regression {text!r} is not a number: write 5% (or the fraction 0.05)")
    value = Fraction(m.group("num"))
    if m.group("pct"):
        return value / 100
    if value > 1:
        raise BadRequest(f"max regression {text!r} is ambiguous: write {m.group('num')}% for a percentage, "
                         "or a fraction of at most 1 (0.05 = 5%)")
    return value


def default_metrics(sides: Sequence[CheckSide]) -> list[str]:
    """device_total when either run has device time, else cpu_total; and step_time when both have steps."""
    first = "device_total" if any(s.device_total_ns for s in sides) else "cpu_total"
    return [first, *(["step_time"] if all(s.step for s in sides) else [])]


def check_metric(metric: str) -> str:
    kind, _, name = metric.partition(":")
    if (name and kind in ("op", "kernel")) or (not name and metric in METRICS):
        return metric
    raise BadRequest(f"unknown metric {metric!r}; metrics: {', '.join(METRICS)}")


def metric_value(side: CheckSide, metric: str, device: bool) -> int | None:
    """The metric in one run (ns); None where the run cannot have it (no steps, an absent name is 0)."""
    kind, _, name = metric.partition(":")
    if metric == "device_total":
        return side.device_total_ns
    if metric == "cpu_total":
        return side.cpu_total_ns
    if metric == "step_time":
        return None if side.step is None else side.step[1] // side.step[0]
    if metric == "peak_memory":
        return side.peak_memory_bytes
    if kind == "op":
        return (side.op_device_ns if device else side.op_cpu_ns).get(name, 0)
    return side.kernel_ns.get(name, 0)


def compute_check(baseline: CheckSide, candidate: CheckSide, metrics: Sequence[str],
                  max_regression: Fraction) -> CheckResult:
    """Each metric of `candidate` against `baseline`: a regression when it grew by more than
    `max_regression` of the baseline (any growth from 0), an improvement when it shrank by more."""
    device = bool(baseline.device_total_ns or candidate.device_total_ns)
    rows: list[CheckRow] = []
    for metric in [check_metric(m) for m in (metrics or default_metrics([baseline, candidate]))]:
        base, cand = metric_value(baseline, metric, device), metric_value(candidate, metric, device)
        if base is None or cand is None:
            missing = baseline if base is None else candidate
            if metric == "peak_memory":
                raise BadRequest(f"run {missing.id} ({missing.name}) has no [memory] events: peak_memory needs a "
                                 "profile recorded with profile_memory=True")
            raise BadRequest(f"run {missing.id} ({missing.name}) has no ProfilerStep#N: step_time needs a "
                             "profile recorded with a schedule (prof.step())")
        _no_such_name(metric, baseline, candidate, device)
        rows.append({"metric": metric, "baseline_ns": base, "candidate_ns": cand, "delta_ns": cand - base,
                     "pct_change": pct_change(base, cand), "verdict": verdict(base, cand, max_regression),
                     "unit": "bytes" if metric in BYTE_METRICS else "ns"})
    regressions = sum(r["verdict"] == "regression" for r in rows)
    return {"baseline": {"id": baseline.id, "name": baseline.name},
            "candidate": {"id": candidate.id, "name": candidate.name},
            "max_regression_pct": float(max_regression * 100), "rows": rows, "regressions": regressions,
            "passed": regressions == 0}


def verdict(base: int, cand: int, max_regression: Fraction) -> str:
    if base == 0:
        return "regression" if cand > 0 else "ok"
    change = Fraction(cand - base, base)
    if change > max_regression:
        return "regression"
    return "improvement" if change < -max_regression else "ok"


def _no_such_name(metric: str, baseline: CheckSide, candidate: CheckSide, device: bool) -> None:
    """A name in neither run is a typo, not a pass."""
    kind, _, name = metric.partition(":")
    if not name:
        return
    tables = [(s.op_device_ns if device else s.op_cpu_ns) if kind == "op" else s.kernel_ns
              for s in (baseline, candidate)]
    if not any(name in t for t in tables):
        raise BadRequest(f"no {'op' if kind == 'op' else 'device execution'} named {name!r} in either run")
