"""The fleet page's data: one op's (or kernel's) time across the last N ready runs matching a filter, each run
against the one before it and the median of those before it, computed once for `/fleet` and
`/api/fleet/ops`. Runs from the catalog, numbers from explorer/store/fleet_queries.py, the verdict from
analysis/check.py."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from fractions import Fraction
from urllib.parse import urlencode

from explorer.analysis.check import DEFAULT_MAX_REGRESSION, parse_threshold, verdict
from explorer.analysis.compare import pct_change
from explorer.errors import BadRequest
from explorer.model.shapes import FleetPoint, FleetResult, FleetSuggestion
from explorer.store.catalog.catalog import RunRecord
from explorer.store.fleet_queries import FleetCell, check_kind, load_fleet_series
from explorer.store.runs import RunStore
from explorer.views.charts import make_fleet_figure

DEFAULT_LAST = 30
MAX_LAST = 1000
MAX_NAME_CHARS = 1000
KIND_LABELS = {"op": "op", "kernel": "kernel"}


@dataclass(frozen=True)
class FleetQuery:
    """What the form and the query string choose: the name (empty: the most expensive one), op or
    kernel, the runs (tag, run-name substring, the last N) and the regression threshold."""

    name: str = ""
    kind: str = "op"
    tag: str = ""
    run_name: str = ""
    last: int = DEFAULT_LAST
    max_regression: str = DEFAULT_MAX_REGRESSION

    def query_string(self) -> str:
        """The non-default parameters, the same for the page and its twin."""
        default = FleetQuery()
        pairs = [(k, str(getattr(self, k))) for k in ("name", "kind", "tag", "run_name", "last", "max_regression")
                 if getattr(self, k) != getattr(default, k)]
        return urlencode(pairs)


def fleet_runs(store: RunStore, q: FleetQuery) -> list[RunRecord]:
    """The last `q.last` ready runs matching the filter, oldest first (the series' order)."""
    if not 1 <= q.last <= MAX_LAST:
        raise BadRequest(f"last must be between 1 and {MAX_LAST}, not {q.last}")
    records, _ = store.catalog.list(name=q.run_name or None, tag=q.tag or None, status="ready", limit=q.last)
    return list(reversed(records))


def compute_fleet(store: RunStore, q: FleetQuery, timeout_s: float) -> FleetResult:
    """The series for `q`: per run calls, total and avg ns, change vs the previous run and vs the median
    of the previous runs, and a regression verdict by the gate's rule against that median."""
    check_kind(q.kind)
    threshold = parse_threshold(q.max_regression)
    runs = fleet_runs(store, q)
    cells, top = load_fleet_series(store, [r.id for r in runs], q.kind, q.name or "", timeout_s)
    name = q.name or (top[0][0] if top else "")
    if not q.name and name:
        cells, _ = load_fleet_series(store, [r.id for r in runs], q.kind, name, timeout_s)
    suggestions: list[FleetSuggestion] = [{"name": n, "total_ns": t} for n, t in top]
    points = fleet_points(runs, cells, threshold) if cells else []
    return {"name": name, "kind": q.kind, "tag": q.tag, "run_name": q.run_name, "last": q.last,
            "max_regression_pct": float(threshold * 100), "runs_matched": len(runs), "runs": points,
            "regressions": sum(p["verdict"] == "regression" for p in points),
            "suggestions": suggestions, "note": fleet_note(q, name, len(runs), bool(cells))}


def fleet_points(runs: list[RunRecord], cells: dict[str, FleetCell], threshold: Fraction) -> list[FleetPoint]:
    """One point per run, oldest first; a run without the name counts 0 (the gate's rule for op:NAME)."""
    points: list[FleetPoint] = []
    totals: list[int] = []
    for rec in runs:
        cell = cells.get(rec.id, FleetCell(0, 0))
        prev = totals[-1] if totals else None
        # the lower middle for an even count: the median is one run's own value, an exact integer ns
        median = statistics.median_low(totals) if totals else None
        points.append({
            "id": rec.id, "run": rec.name, "created_at": rec.created_at, "tags": rec.tags,
            "page": f"/runs/{rec.id}", "calls": cell.calls, "total_ns": cell.total_ns,
            "avg_ns": cell.total_ns // cell.calls if cell.calls else 0,
            "delta_prev_ns": None if prev is None else cell.total_ns - prev,
            "pct_prev": None if prev is None else pct_change(prev, cell.total_ns),
            "median_prev_ns": median,
            "pct_median": None if median is None else pct_change(median, cell.total_ns),
            "verdict": "first" if median is None else verdict(median, cell.total_ns, threshold),
        })
        totals.append(cell.total_ns)
    return points


def fleet_note(q: FleetQuery, name: str, n_runs: int, found: bool) -> str:
    """Why the series is empty, in one sentence (empty when it is not)."""
    what = KIND_LABELS[q.kind]
    if n_runs == 0:
        filt = " and ".join(s for s in (f"tag {q.tag!r}" if q.tag else "",
                                          f"a name containing {q.run_name!r}" if q.run_name else "") if s)
        return "no ready run" + (f" with {filt}" if filt else "") + "."
    if not name:
        return f"none of the {n_runs} runs has any {what}."
    if not found:
        return f"no {what} named {name!r} in the {n_runs} runs matched; pick one of the suggested names."
    return ""


@dataclass
class FleetPage:
    """`/fleet?name=...&kind=...&tag=...&last=...`; twin `/api/fleet/ops` with the same query string."""

    fleet: FleetResult
    query: FleetQuery
    figure: dict[str, object]
    max_last: int = MAX_LAST
    twin: str = ""


def build_fleet_page(store: RunStore, q: FleetQuery, timeout_s: float) -> FleetPage:
    fleet = compute_fleet(store, q, timeout_s)
    qs = q.query_string()
    return FleetPage(fleet, q, make_fleet_figure(fleet), twin="/api/fleet/ops" + (f"?{qs}" if qs else ""))
