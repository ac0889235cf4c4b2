"""A run's overview (`/runs/{id}`): the lane breakdown, the top ops and the advisor's top findings."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from explorer.analysis.rank_slices import parse_ranks
from explorer.model.advice_shapes import Finding
from explorer.model.lanes import Lane
from explorer.model.shapes import (
    Breakdown,
    OpRow,
    RunJson,
)
from explorer.runs.run import Run
from explorer.store.queries import (
    load_ops,
)
from explorer.views.advice import OVERVIEW_FINDINGS, run_advice
from explorer.views.charts import (
    make_lane_breakdown_figure,
    make_top_ops_figure,
)
from explorer.views.links import run_json

TOP_OPS = 15
log = logging.getLogger(__name__)


@dataclass
class OverviewPage:
    """`/runs/{id}`; twins `/api/runs/{id}` and `/api/runs/{id}/breakdown`."""

    run: RunJson
    breakdown: Breakdown
    top_device: list[OpRow]
    top_cpu: list[OpRow]
    figures: dict[str, dict[str, Any]]
    twin: str = ""
    rank: str = ""  # the `rank=` filter of the breakdown as given ("" every rank)
    ranks: list[int] = field(default_factory=list)  # the run's ranks (the filter is offered when several)
    findings: list[Finding] = field(default_factory=list)  # the advisor's top findings (explorer.views.advice)

    @property
    def device_busy_pct(self) -> float | None:
        return device_busy_pct(self.breakdown)


def device_busy_pct(breakdown: Breakdown) -> float | None:
    """The busiest device's busy % (the overview's card and compare's host-bound test), else the hardware
    lane's; None without device time."""
    devices = breakdown["devices"]
    if devices:
        return max(float(d["busy_pct"]) for d in devices)
    hw = [r for r in breakdown["lanes"] if r["lane"] == Lane.HARDWARE]
    return float(hw[0]["busy_pct"]) if hw else None


def build_overview(run: Run, rank: str = "") -> OverviewPage:
    """The breakdown of the ranks `rank` names ("" every rank); the top-op charts stay the whole run's."""
    bd = run.breakdown(parse_ranks(rank))
    top_device, top_cpu = overview_top_ops(run)
    figures = {"lanes": make_lane_breakdown_figure(bd),
               "top_device": make_top_ops_figure(top_device, "self_device_ns"),
               "top_cpu": make_top_ops_figure(top_cpu, "self_cpu_ns")}
    if not top_device:  # a host-only profile: inclusive CPU time says more than an empty device chart
        figures["top_device"] = make_top_ops_figure(load_ops(run.store, run.id, sort="-cpu_total_ns", limit=TOP_OPS),
                                                    "cpu_total_ns", title="No device time: top ops by CPU total")
    return OverviewPage(run_json(run.record), bd, top_device, top_cpu, figures, f"/api/runs/{run.id}",
                        rank, run.rank_ids(), overview_findings(run))


def overview_findings(run: Run) -> list[Finding]:
    """The overview's top findings. The advisor failing on an unusual run (AdviceBug, or any bug) is logged and
    leaves the panel out; the overview itself still shows (the Advice page reports the error)."""
    try:
        return list(run_advice(run)["findings"][:OVERVIEW_FINDINGS])
    except Exception:
        log.exception("the advisor failed on run %s; the overview shows no findings", run.id)
        return []


def overview_top_ops(run: Run) -> tuple[list[OpRow], list[OpRow]]:
    """The overview's two charts, both of the operators view: top by self device time (ops with some; the
    Python frames and runtime calls that launched device work outside any op are rows there too, so no
    device time is left out), and top by self CPU time."""
    by_device = load_ops(run.store, run.id, sort="-self_device_ns", limit=TOP_OPS, view="operators")
    return ([r for r in by_device if r["self_device_ns"] > 0],
            load_ops(run.store, run.id, sort="-self_cpu_ns", limit=TOP_OPS, view="operators"))


def compute_run_breakdown(run: Run, rank: str = "") -> Breakdown:
    """The `/api/runs/{id}/breakdown` object: the lane breakdown of the run, or of the ranks `rank` names."""
    return run.breakdown(parse_ranks(rank))
