"""The ranks pages' data, computed once for the HTML and its JSON twin: the per-rank summary with its
stragglers (`/runs/{id}/ranks`, `/api/runs/{id}/ranks`) and one rank against another
(`/runs/{id}/ranks/compare?a=&b=`, `/api/runs/{id}/ranks/compare`). The numbers are
explorer.analysis.ranks'; this only loads the run and names the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from explorer.analysis.ranks import compute_rank_compare, reference_rank, slowest_rank
from explorer.errors import BadRequest
from explorer.model.ranks import run_ranks
from explorer.model.shapes import RankCompareResult, RanksResult, RunJson
from explorer.runs.run import Run
from explorer.store.queries import load_op_inputs
from explorer.store.runs import RunStore
from explorer.views.charts import make_compare_figure, make_ranks_figure
from explorer.views.links import run_json


def rank_nav(store: RunStore, run: RunJson | None) -> int:
    """How many ranks a ready run has (the run nav links the ranks page when it is more than one)."""
    if run is None or run["status"] != "ready":
        return 0
    return len(run_ranks(store.table(run["id"], "tracks")))


def compute_run_rank_compare(run: Run, a: int | None = None, b: int | None = None) -> RankCompareResult:
    """The `/api/runs/{id}/ranks/compare` object: rank `a` against rank `b` (the baseline). Left out, `a` is
    the slowest rank (a straggler, the latest arriver first) and `b` the reference rank (arriving nearest
    the median), as the straggler rule picks them."""
    summary = run.ranks()
    rows = summary["ranks"]
    if len(rows) < 2:
        raise BadRequest("rank compare needs a run of two or more ranks")
    chosen = a is not None or b is not None
    slow, ref = default_pair(summary)
    pick_a = a if a is not None else slow
    pick_b = b if b is not None else ref
    if pick_a == pick_b and not chosen:
        pick_b = next(r["rank"] for r in rows if r["rank"] != pick_a)
    slices, flows = load_op_inputs(run.store, run.id)
    result = compute_rank_compare(slices, run.table("tracks"), pick_a, pick_b, flows)
    return {"a": pick_a, "b": pick_b, "reason": "chosen" if chosen else "slowest vs median", "compare": result}


def default_pair(summary: RanksResult) -> tuple[int, int]:
    """(a, b) of "compare slowest": the slowest rank (a straggler, the latest arriver first) against the
    reference rank (arriving nearest the median), another rank when they are one; two or more ranks."""
    rows = summary["ranks"]
    slow = slowest_rank(rows)
    ref = reference_rank(rows, summary["median_step_time_ns"])
    assert slow is not None and ref is not None
    if ref == slow:
        ref = next(r["rank"] for r in rows if r["rank"] != slow)
    return slow, ref


@dataclass
class RanksPage:
    """`/runs/{id}/ranks`; twin `/api/runs/{id}/ranks`."""

    run: RunJson
    ranks: RanksResult
    figure: dict[str, Any]
    twin: str = ""
    slowest: int | None = None  # the compare link's default pair (compute_run_rank_compare's)
    reference: int | None = None


@dataclass
class RankComparePage:
    """`/runs/{id}/ranks/compare?a=&b=`; twin `/api/runs/{id}/ranks/compare` with the same query."""

    run: RunJson
    result: RankCompareResult
    ranks: list[int]
    figure: dict[str, Any]
    twin: str = ""


def build_ranks_page(run: Run) -> RanksPage:
    data = run.ranks()
    page = RanksPage(run_json(run.record), data, make_ranks_figure(data), f"/api/runs/{run.id}/ranks")
    if len(data["ranks"]) > 1:
        page.slowest, page.reference = default_pair(data)
    return page


def build_rank_compare_page(run: Run, a: int | None = None, b: int | None = None) -> RankComparePage:
    result = compute_run_rank_compare(run, a, b)
    q = urlencode({k: v for k, v in (("a", a), ("b", b)) if v is not None})
    return RankComparePage(run_json(run.record), result, run.rank_ids(), make_compare_figure(result["compare"]),
                           f"/api/runs/{run.id}/ranks/compare" + (f"?{q}" if q else ""))
