"""The Neuron Explorer's recommendation rules as a table (thresholds from PROFILE_SCHEMA.md), evaluated on
the Summary of a whole device profile or of a window: each finding carries the number that triggered it,
the threshold and what it is measured on. Wording of the advice is data here; numbers are formatted by
the page.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from explorer.analysis.device.rows import (
    ENGINES,
    Tables,
    Window,
    encode,
    engine_codes,
    ints,
    overlap_mask,
    select,
    strings,
    table,
    times,
    window_of,
)
from explorer.analysis.device.summary import Metrics, compute_device_summary
from explorer.model.device_shapes import RecommendationJson

Unit = Literal["ratio", "bytes"]
# Collectives: a group is ops of one operation on the same element count and dtype; an op is an outlier
# when it takes more than this many times its group's median (the schema names no factor; ours). With
# a factor of 2 an op in a group of one or two can never be an outlier, so no minimum group size is needed.
CC_OUTLIER_FACTOR = 2.0


@dataclass(frozen=True)
class Rule:
    """Fires when `measure(metrics)` is below (`fires_below`) or above the threshold; a measure of None
    (its inputs unknown or zero) never fires."""

    key: str
    finding: str
    advice: str
    measure: Callable[[Metrics], Fraction | None]
    threshold: Fraction
    fires_below: bool
    unit: Unit = "ratio"


def _ratio(numerator: str, denominator: str) -> Callable[[Metrics], Fraction | None]:
    def measure(m: Metrics) -> Fraction | None:
        top, bottom = m.get(numerator), m.get(denominator)
        if top is None or not bottom:
            return None
        return Fraction(top) / Fraction(bottom)
    return measure


def _metric(name: str) -> Callable[[Metrics], Fraction | None]:
    def measure(m: Metrics) -> Fraction | None:
        value = m.get(name)
        return None if value is None else Fraction(value)
    return measure


SUMMARY_RULES: tuple[Rule, ...] = (
    Rule("model_flops_ratio", "Model FLOPs are under half of the FLOPs the hardware did",
         "Look for padding, recomputation or unfused layouts that make the tensor engine do redundant work.",
         _ratio("model_flops", "hardware_flops"), Fraction(1, 2), fires_below=True),
    Rule("transpose_flops_ratio", "Transposes take over 10 % of the hardware FLOPs",
         "Choose layouts that avoid transposes on the tensor engine (or transpose in DMA).",
         _ratio("transpose_flops", "hardware_flops"), Fraction(1, 10), fires_below=False),
    Rule("spill_reload_ratio", "Spill reloads are over 25 % of HBM reads",
         "SBUF is spilling: tile smaller or reorder loops so working sets stay on chip.",
         _ratio("spill_reload_bytes", "hbm_read_bytes"), Fraction(1, 4), fires_below=False),
    Rule("dma_average_transfer", "The average DMA transfer is under 32 KiB",
         "Batch small transfers into larger, contiguous ones; transfers under 4 KiB are the costliest.",
         _metric("dma_transfer_average_bytes"), Fraction(32 * 1024), fires_below=True, unit="bytes"),
)
NKI_COVERAGE_RULE = Rule(
    "nki_coverage", "Under half of this engine's instructions come from NKI source",
    "The rest runs compiler-generated code: consider an NKI kernel for the hot part.",
    _metric("nki_coverage"), Fraction(1, 2), fires_below=True)
CC_OUTLIER_RULE = Rule(
    "collective_outlier", "A collective took over twice its group's median",
    "Check for stragglers or contention at this point of the timeline.",
    _metric("duration_over_median"), Fraction(CC_OUTLIER_FACTOR), fires_below=False)


def _fired(rule: Rule, value: Fraction | None, subject: str | None = None,
           at_ns: int | None = None) -> RecommendationJson | None:
    """The finding of a rule that fired: `value` and `threshold` in the rule's unit (a ratio 0..1, or
    bytes); `subject` names the engine or collective it is about (None for the whole profile or window);
    `at_ns` is the collective's start on the profile's clock (absolute; the page makes it relative)."""
    if value is None or not (value < rule.threshold if rule.fires_below else value > rule.threshold):
        return None
    return {"key": rule.key, "finding": rule.finding, "advice": rule.advice, "value": float(value),
            "threshold": float(rule.threshold), "unit": rule.unit, "subject": subject, "at_ns": at_ns}


def evaluate_summary_rules(metrics: Metrics) -> list[RecommendationJson]:
    """The Summary rules on one set of Summary metrics (the profile's or a window's)."""
    found = [_fired(rule, rule.measure(metrics)) for rule in SUMMARY_RULES]
    return [r for r in found if r is not None]


def compute_recommendations(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                            core: int | None = None) -> list[RecommendationJson]:
    """Every rule on the profile (no window: its own Summary) or on the window and core."""
    metrics = compute_device_summary(tables, start_ns, end_ns, core).metrics
    window = window_of(tables, start_ns, end_ns)
    return [*evaluate_summary_rules(metrics), *_nki_coverage(tables, window, core),
            *_collective_outliers(tables, window)]


def nki_coverage(tables: Tables, window: Window, core: int | None) -> dict[str, Fraction]:
    """Per engine, the share of its instructions in the window that carry an NKI source location. Empty
    when the profile has no NKI source locations at all (compiled without NKI debug info: nothing to
    measure)."""
    rows = select(table(tables, "Instruction"), window, core)
    if rows is None or "nki_source_location" not in rows.column_names:
        return {}
    if not rows.column("nki_source_location").drop_null().to_pylist():
        return {}
    nki = encode(rows, "nki_source_location", lambda v: "nki" if v else None)[0] >= 0
    engines = engine_codes(rows)
    out = {}
    for code, engine in enumerate(ENGINES):
        mine = engines == code
        if mine.any():
            out[engine] = Fraction(int((mine & nki).sum()), int(mine.sum()))
    return out


def _nki_coverage(tables: Tables, window: Window, core: int | None) -> list[RecommendationJson]:
    found = [_fired(NKI_COVERAGE_RULE, share, engine) for engine, share in nki_coverage(tables, window, core).items()]
    return [r for r in found if r is not None]


def _collective_outliers(tables: Tables, window: Window) -> list[RecommendationJson]:
    """CcOp rows in the window against the median of their group (operation, element count, dtype) over
    the whole profile."""
    rows = table(tables, "CcOp")
    if rows is None:
        return []
    start, end = times(rows)
    elements = ints(rows, "num_elements")
    groups = list(zip(strings(rows, "operation").tolist(),
                      (elements if elements is not None else np.zeros(rows.num_rows, np.int64)).tolist(),
                      strings(rows, "dtype").tolist(), strict=True))
    durations = (end - start).tolist()
    by_group: dict[tuple[object, ...], list[int]] = {}
    for key, duration in zip(groups, durations, strict=True):
        by_group.setdefault(key, []).append(duration)
    out = []
    for i in np.flatnonzero(overlap_mask(start, end, window)).tolist():
        same = by_group[groups[i]]
        median = statistics.median(same)
        if not median:
            continue
        found = _fired(CC_OUTLIER_RULE, Fraction(durations[i]) / Fraction(median), str(groups[i][0]),
                       int(start[i]))
        if found is not None:
            out.append(found)
    return out
