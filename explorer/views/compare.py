"""Runs compared op by op and kernel by kernel (`/compare`, twin `/api/compare`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from explorer.analysis.breakdown import compute_breakdown
from explorer.analysis.compare import RunOps, compute_compare, kernel_table, median_step_ns
from explorer.analysis.steps import compute_steps
from explorer.errors import BadRequest
from explorer.model.advice_shapes import FindingChange
from explorer.model.ranks import run_ranks
from explorer.model.shapes import (
    CompareResult,
    Headline,
)
from explorer.runs.run import Run
from explorer.store.queries import (
    DEFAULT_OP_VIEW,
    op_table,
    run_device_total_ns,
    select_op_view,
)
from explorer.views.advice import compare_findings, run_advice
from explorer.views.charts import (
    make_compare_figure,
)
from explorer.views.compare_memory import compute_compare_memory
from explorer.views.overview import device_busy_pct

MAX_COMPARE_RUNS = 8


@dataclass
class ComparePage:
    """`/compare?runs=a,b,c&baseline=a`; twin `/api/compare` with the same query. `compare` lists the
    baseline run first (explorer.analysis.compare.choose_baseline says which and why)."""

    compare: CompareResult
    figure: dict[str, Any]
    twin: str = ""
    findings: list[FindingChange] = field(default_factory=list)  # advisor findings gained/lost vs the baseline

    @property
    def metric(self) -> str:
        return str(self.compare["headline"]["metric"])

    @property
    def headline(self) -> Headline:
        """compute_headline's object, the one /api/compare carries."""
        return self.compare["headline"]

    def baseline_link(self, run_id: str) -> str:
        """This comparison with `run_id` as the baseline (first, and chosen in the link)."""
        ids = [r["id"] for r in self.compare["runs"]]
        return "/compare?" + compare_query([run_id, *(i for i in ids if i != run_id)], run_id)


def compare_query(run_ids: list[str], baseline: str | None = None) -> str:
    """The query string of a compare page and its twin: `runs=a,b` plus `baseline=` when one is chosen."""
    params = {"runs": ",".join(run_ids), **({"baseline": baseline} if baseline else {})}
    return urlencode(params, safe=",")


def check_compare_ids(run_ids: list[str]) -> None:
    """Two to eight distinct run ids, else a BadRequest."""
    if not 2 <= len(run_ids) <= MAX_COMPARE_RUNS:
        raise BadRequest(f"compare takes 2 to {MAX_COMPARE_RUNS} run ids, comma-separated: /compare?runs=a,b")
    if len(set(run_ids)) != len(run_ids):
        raise BadRequest("a run appears twice in the comparison")


def compute_run_compare(runs: list[Run], baseline: str | None = None) -> CompareResult:
    """The `/api/compare` object for stored runs: ops from the op table's operators view, kernels from
    the slices table."""
    check_compare_ids([r.id for r in runs])
    result = compute_compare([compare_side(r) for r in runs], baseline)
    if memory := compute_compare_memory(runs[0].store, [r["id"] for r in result["runs"]]):  # memory in compare
        result["memory"] = memory
    return result


def compare_side(run: Run) -> RunOps:
    """One stored run's side of a comparison: its operators view (python frames, with_stack, would bury
    the ops under recursive frames), kernels, span, median step, busiest device and device models."""
    store, run_id, rec = run.store, run.id, run.record
    s, slices, tracks = rec.summary, run.table("slices"), run.table("tracks")
    steps = compute_steps(slices, s.start_ns, s.end_ns)
    busy = device_busy_pct(compute_breakdown(slices, tracks, run.table("flows"), s.start_ns, s.end_ns, top=0))
    sizes = [f["distributed_info"].get("world_size") for f in s.files if isinstance(f.get("distributed_info"), dict)]
    world = max((w for w in sizes if isinstance(w, int) and not isinstance(w, bool)), default=None)
    return RunOps(rec.id, rec.name, select_op_view(op_table(store, run_id), DEFAULT_OP_VIEW), run_device_total_ns(rec),
                  tuple(rec.tags), kernel_table(slices), span_ns=s.span_ns, step_ns=median_step_ns(steps),
                  step_count=steps["count"], step_annotation=steps["annotation"] if steps["count"] else "", busy_pct=busy,
                  devices=[d.model_dump(mode="json") for d in s.devices],
                  world_size=world if world is not None else max(1, len(run_ranks(tracks))))


def build_compare_page(runs: list[Run], baseline: str | None = None) -> ComparePage:
    """The comparison, and the advisor's findings gained and lost against its baseline (listed first)."""
    data = compute_run_compare(runs, baseline)
    by_id = {r.id: r for r in runs}
    first, *rest = [by_id[r["id"]] for r in data["runs"]]
    findings = [compare_findings(run_advice(first), run_advice(r)) for r in rest]
    return ComparePage(data, make_compare_figure(data), "/api/compare?" + compare_query([r.id for r in runs], baseline),
                       findings)
