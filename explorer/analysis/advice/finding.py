"""How a finding is made and ranked: one constructor that refuses a saving larger than the time it acts on,
the evidence link builders, and the order (largest expected saving first). No rule lives here."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from explorer.analysis.gap_evidence import timeline_window
from explorer.model.advice_shapes import Evidence, Fact, Finding

CONFIDENCES = ("high", "medium", "low")
EFFORTS = ("small", "medium", "large")


class AdviceBug(RuntimeError):
    """A rule claimed more than it can act on: a bug in the rule, never shown as advice."""


@dataclass(frozen=True)
class Context:
    """What every rule needs besides its own inputs: the run id (for links), its span and its step count."""

    run_id: str
    origin_ns: int
    span_ns: int
    steps: int


def fact(label: str, value: int, unit: str = "ns") -> Fact:
    return {"label": label, "value": int(value), "unit": unit}


def timeline_link(ctx: Context, label: str, start_ns: int, end_ns: int) -> Evidence:
    """A timeline window over [start_ns, end_ns) in ns relative to the run origin."""
    return {"kind": "timeline", "label": label,
            "path": f"/runs/{ctx.run_id}/timeline?{timeline_window(start_ns, end_ns, ctx.span_ns)['query']}"}


def page_link(ctx: Context, kind: str, label: str, page: str, **query: str) -> Evidence:
    q = urlencode(query)
    return {"kind": kind, "label": label, "path": f"/runs/{ctx.run_id}/{page}" + (f"?{q}" if q else "")}


def make_finding(ctx: Context, rule: str, title: str, symptom: str, facts: list[Fact], evidence: list[Evidence],
                 fix: str, saving_ns: int | None, acts_on_ns: int, formula: str, confidence: str,
                 effort: str) -> Finding:
    if saving_ns is not None and not 0 <= saving_ns <= acts_on_ns:
        raise AdviceBug(f"{rule}: saving {saving_ns} ns outside [0, {acts_on_ns}] ns it acts on")
    if confidence not in CONFIDENCES or effort not in EFFORTS:
        raise AdviceBug(f"{rule}: confidence {confidence!r} / effort {effort!r}")
    per_step = saving_ns // ctx.steps if saving_ns is not None and ctx.steps else None
    return {"rule": rule, "title": title, "symptom": symptom, "facts": facts, "evidence": evidence, "fix": fix,
            "saving_ns": saving_ns, "acts_on_ns": int(acts_on_ns), "per_step_ns": per_step, "formula": formula,
            "confidence": confidence, "effort": effort}


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """Largest expected saving first; unquantified findings after every quantified one; ties by confidence,
    then rule and title so the order is stable."""
    return sorted(findings, key=lambda f: (f["saving_ns"] is None, -(f["saving_ns"] or 0),
                                           CONFIDENCES.index(f["confidence"]), f["rule"], f["title"]))
