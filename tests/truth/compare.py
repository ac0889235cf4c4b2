"""The product's numbers next to the independent reader's (tests/truth/reader.py), one `Check` per number:
the product side calls the functions the pages and their JSON twins call (explorer.runs.Run, explorer.views);
the truth side is the reader alone. Used by tests/truth/test_truth.py and bench/truth.py.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.kernels import compute_run_kernels
from explorer.views.ops import OpsQuery, compute_run_ops
from tests.truth import reader as R

CHECKS = ("span", "device_total", "device_busy", "kernels", "steps", "rank_steps", "rank_split", "ops_by_op",
          "ops_attributed", "ops_view_total", "collectives", "straggler_collectives", "straggler_ranks",
          "advice_bounded")


@dataclass(frozen=True)
class Check:
    """One number (or table) of one run: what the reader says, what the product says."""

    name: str
    truth: Any
    product: Any

    @property
    def ok(self) -> bool:
        return bool(self.truth == self.product)


@dataclass
class Product:
    """One ingested run of the product and its page data, computed lazily by the pages' own functions."""

    store: RunStore
    run_id: str

    @property
    def rec(self) -> Any:
        return self.store.require_ready(self.run_id)


def ingest(paths: list[Path], data_dir: Path | None = None) -> Product:
    """The files as one run of a fresh data folder (a temporary one unless given)."""
    folder = data_dir or Path(tempfile.mkdtemp(prefix="truth-"))
    store = RunStore(folder / "data")
    return Product(store, ingest_paths(store, list(paths)).id)


# ---- one check each: (truth, product) ---------------------------------------------------------------

def check_span(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """(start, end) absolute ns: the reader's first/last real event; the product's run summary."""
    s = p.rec.summary
    return R.span(rs), (s.start_ns, s.end_ns)


def check_device_total(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    return R.device_total(rs), p.rec.summary.device.device_total_ns


def check_device_busy(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """Busy ns per device, as a sorted list (the product labels devices its own way)."""
    devices = Run.of(p.store, p.run_id).breakdown()["devices"]
    return sorted(R.device_busy(rs).values()), sorted(d["busy_ns"] for d in devices)


def check_kernels(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """{name: (calls, total ns)} over every device execution."""
    rows = compute_run_kernels(Run.of(p.store, p.run_id))["rows"]
    return R.kernel_totals(rs), {r["name"]: (r["calls"], r["total_ns"]) for r in rows}


def check_steps(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """The Steps page: one row per (rank, step): (name, dur, compute, communication, idle), as a multiset
    (the page has no rank column)."""
    truth = Counter((s.name, s.dur_ns, s.compute_ns, s.communication_ns, s.idle_ns) for s in R.steps(rs))
    rows = Run.of(p.store, p.run_id).steps()["steps"]
    return truth, Counter((r["name"], r["dur_ns"], r["compute_ns"], r["communication_ns"], r["idle_ns"]) for r in rows)


def check_rank_steps(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """The Ranks page: each rank's steps as (name, dur) in order (ranks without steps left out)."""
    if len(rs) < 2:
        return "n/a", "n/a"  # the Ranks page is a multi-rank run's
    truth = {r.rank: [(s.name, s.dur) for s in R.rank_steps(r)] for r in rs}
    rows = Run.of(p.store, p.run_id).ranks()["ranks"]
    prod = {r["rank"]: [(s["name"], s["dur_ns"]) for s in r["steps"]] for r in rows}
    return {k: v for k, v in truth.items() if v}, {k: v for k, v in prod.items() if v}


def check_rank_split(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """The Ranks page: each rank's (mode, window, compute, comm, exposed comm, idle) (ranks with steps)."""
    if len(rs) < 2:
        return "n/a", "n/a"
    truth = {r.rank: R.rank_split(r) for r in rs}
    rows = Run.of(p.store, p.run_id).ranks()["ranks"]
    prod = {r["rank"]: R.RankSplit(r["mode"], r["window_ns"], r["compute_ns"], r["comm_ns"], r["exposed_comm_ns"],
                                   r["idle_ns"]) for r in rows if r["steps"]}
    return {k: v for k, v in truth.items() if v is not None}, prod


def _op_rows(p: Product) -> list[Any]:
    return compute_run_ops(Run.of(p.store, p.run_id), OpsQuery(sort="-self_device_ns"))["rows"]


def check_ops_by_op(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """Device ns per launching op (the default op view's self device time per name; > 0 only)."""
    truth = {k: v for k, v in R.device_time_by_op(rs).items() if k != R.UNATTRIBUTED and v}
    prod: Counter[str] = Counter()
    for r in _op_rows(p):
        prod[r["name"]] += r["self_device_ns"]
    return truth, {k: v for k, v in prod.items() if v}


def check_ops_attributed(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """The DEVICE TIME card's attributed ns (run summary) against the device time the reader attributes."""
    by_op = R.device_time_by_op(rs)
    return sum(v for k, v in by_op.items() if k != R.UNATTRIBUTED), p.rec.summary.device.attributed_ns


def check_ops_view_total(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """The default op view's self device total (the table the user reads) against the reader's attributed."""
    by_op = R.device_time_by_op(rs)
    return sum(v for k, v in by_op.items() if k != R.UNATTRIBUTED), sum(r["self_device_ns"] for r in _op_rows(p))


def check_collectives(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """Every matched collective's entries as a multiset of (rank, name, absolute entry ns)."""
    truth = Counter((e.rank, e.name, e.entry_ns) for g in R.matched(rs) if len(g) > 1 for e in g)
    origin = p.rec.summary.start_ns
    rows = Run.of(p.store, p.run_id).collectives().rows
    prod = Counter((x["rank"], r["name"], x["arrival_ns"] + origin) for r in rows for x in r["ranks"]
                   if len(r["ranks"]) > 1)
    return truth, prod


def check_straggler_collectives(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """The latest arriver: the reader's, and the Collectives page's: the `last_arriver` whose rows' `wait_ns` (the
    others' waiting for it) add up to the most, then the most rows, then the lowest rank."""
    rows = [r for r in Run.of(p.store, p.run_id).collectives().rows if len(r["ranks"]) > 1]
    counts = Counter(r["last_arriver"] for r in rows)
    waited: Counter[int] = Counter()
    for r in rows:
        waited[r["last_arriver"]] += r["wait_ns"]
    return R.straggler(rs), min(counts, key=lambda k: (-waited[k], -counts[k], k), default=None)


def check_straggler_ranks(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """The Ranks page's latest arriver against the reader's (the rank last to the most matched collectives); a rank
    the page flags as a straggler by arrival is that rank too (whether one is flagged depends on the page's
    threshold, 5 % of the median step, which the reader does not apply)."""
    s = R.straggler(rs)
    ranks = Run.of(p.store, p.run_id).ranks()
    by_arrival = sorted(r["rank"] for r in ranks["ranks"]
                        if r["straggler"] and r["evidence"] and r["evidence"]["rule"] == "arrival")
    return (s, [s] if by_arrival else []), (ranks["latest_arriver"], by_arrival)


def check_advice_bounded(rs: list[R.RankTrace], p: Product) -> tuple[Any, Any]:
    """Every finding of the advisor claims no more than the time it acts on (the engine raises AdviceBug
    otherwise, which run_check reports as a disagreement), and acts on no more than the trace holds: the reader's
    span times the number of timelines (each file's distinct pid/tid pairs of complete events, markers' too: a
    loose bound, the most time any rule can act on). Truth: each finding within; product: whether it is."""
    from explorer.views.advice import compute_run_advice

    found = R.span(rs)
    timelines = sum(len({(e.pid, e.tid) for e in r.xs}) for r in rs)
    bound = (found[1] - found[0]) * timelines if found else 0
    findings = compute_run_advice(Run.of(p.store, p.run_id))["findings"]
    product = [(f["rule"], f["title"], (f["saving_ns"] or 0) <= f["acts_on_ns"] <= bound) for f in findings]
    return [(rule, title, True) for rule, title, _ in product], product


CHECKERS: dict[str, Callable[[list[R.RankTrace], Product], tuple[Any, Any]]] = {
    name: globals()[f"check_{name}"] for name in CHECKS}


def run_check(name: str, rs: list[R.RankTrace], p: Product) -> Check:
    """One check; a product error is its answer (an exception's type and text), never a crash."""
    try:
        truth, prod = CHECKERS[name](rs, p)
    except Exception as exc:  # noqa: BLE001 - the harness reports any product failure as a disagreement
        return Check(name, "?", f"{type(exc).__name__}: {exc}")
    return Check(name, truth, prod)


def compare(paths: list[Path], data_dir: Path | None = None) -> list[Check]:
    """Every check of one run (the files together)."""
    rs = R.load_run(paths)
    p = ingest(paths, data_dir)
    return [run_check(name, rs, p) for name in CHECKS]


def describe(c: Check, limit: int = 3) -> str:
    """The first differences of a failed check, short: for tables the keys that differ."""
    t, q = c.truth, c.product
    if isinstance(t, dict | Counter) and isinstance(q, dict | Counter):
        keys = sorted({*t, *q} - {k for k in t if k in q and t[k] == q[k]}, key=str)
        parts = [f"{str(k)[:60]}: {t.get(k)} vs {q.get(k)}" for k in keys[:limit]]
        return f"{len(keys)} differ; " + "; ".join(parts)
    return f"{str(t)[:200]} vs {str(q)[:200]}"
