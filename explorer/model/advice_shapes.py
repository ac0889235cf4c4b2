"""The advisor's JSON shapes (GET /api/runs/{id}/advice): a finding with its measured facts, evidence links,
fix and expected saving. Numbers are ints in their unit (ns, bytes, a count, parts per million); the pages,
the CLI and the report format them. Built by explorer.analysis.advice; served by explorer.views.advice.
"""

from __future__ import annotations

from pydantic import with_config
from typing_extensions import TypedDict

from explorer.model.shapes import STRICT


@with_config(STRICT)
class Fact(TypedDict):
    """One measured number of a symptom: `unit` is ns | bytes | bytes_per_s | count | ppm (a ratio in millionths)."""

    label: str
    value: int
    unit: str


@with_config(STRICT)
class Evidence(TypedDict):
    """A link to where the symptom shows: `kind` timeline | ops | kernels | gaps | steps | ranks | collectives |
    device; `path` is relative to the server root (the page adds its base)."""

    kind: str
    label: str
    path: str


@with_config(STRICT)
class Finding(TypedDict):
    """One rule that fired. `saving_ns` is the expected saving over the whole trace (None: the rule cannot put a
    time on it), never more than `acts_on_ns`, the measured time the fix acts on; `formula` says how."""

    rule: str
    title: str
    symptom: str
    facts: list[Fact]
    evidence: list[Evidence]
    fix: str
    saving_ns: int | None
    acts_on_ns: int
    per_step_ns: int | None  # saving_ns / steps when the run marks steps
    formula: str
    confidence: str  # high | medium | low
    effort: str  # small | medium | large


@with_config(STRICT)
class PeakJson(TypedDict):
    """A device model's published peaks (explorer.analysis.advice.peaks.PEAKS) and where they come from."""

    model: str
    bf16_flops: int  # FLOP/s
    fp32_flops: int
    tf32_flops: int | None  # dense TF32 tensor (AMD MI200: FP32 matrix); None where the device has none
    hbm_bytes_per_s: int | None
    source: str


@with_config(STRICT)
class EfficiencyRow(TypedDict):
    """GEMM ops of one (name, input shapes, dtype): FLOPs and bytes from the shapes, the time they took (device
    time, or CPU time on a host-only run), and the peaks that apply (None: unknown device or dtype)."""

    name: str
    input_shapes: str
    dtype: str
    calls: int
    flops: int
    bytes: int | None
    time_ns: int
    peak_flops_per_s: int | None
    peak_bytes_per_s: int | None


@with_config(STRICT)
class AdviceResult(TypedDict):
    """Every finding of a run, largest expected saving first (unquantified findings last); `span_ns` is what
    a saving is a share of (the profiled span), `steps` how many steps the run marks, `time_basis` whether op
    times are device time or, host-only, CPU time, and `rules` the rules evaluated."""

    run_id: str
    span_ns: int
    steps: int
    time_basis: str  # device | cpu
    findings: list[Finding]
    not_listed: int  # findings whose saving is under min_saving_ns (1/1000 of the span): counted, not listed
    min_saving_ns: int
    rules: list[str]
    device: str  # the run's device model ("" none or several)
    peak: PeakJson | None  # its peaks; None: no device, or a model the peak table does not have
    efficiency: list[EfficiencyRow]


@with_config(STRICT)
class FindingRef(TypedDict):
    rule: str
    title: str
    saving_ns: int | None


@with_config(STRICT)
class FindingChange(TypedDict):
    """On compare: the findings of one run that the baseline does not have (`appeared`) and the baseline's that
    it no longer has (`disappeared`), matched by rule and title."""

    run_id: str
    appeared: list[FindingRef]
    disappeared: list[FindingRef]
