"""The advisor: rules over a run's tables that return findings (symptom with its numbers, evidence links, the
code-level fix, an expected saving with its formula), ranked by saving. docs/advice.md lists the rules."""

from explorer.analysis.advice.engine import AdviceInputs, DeviceRecs, compute_advice

__all__ = ["AdviceInputs", "DeviceRecs", "compute_advice"]
