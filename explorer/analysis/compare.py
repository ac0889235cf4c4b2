"""Compare runs against one baseline: per op (calls, device and CPU time) and per kernel (device
executions by name), every other run's delta against the baseline, one headline metric (the median step,
else the span; summed device or CPU time is only its second figure) and warnings when the runs differ in
kind (device model, world size, steps). `choose_baseline` is the only place that decides the baseline.
Pure functions over per-run tables, returning ints (ns) and ratios; no units or text formatting here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from explorer.errors import BadRequest
from explorer.model.shapes import (
    CompareResult,
    CompareSide,
    CompareWarning,
    DiffRow,
    Headline,
    HeadlineFigure,
    KernelCompare,
    KernelTotals,
    StepsResult,
)

BASELINE_TAGS = ("baseline", "before")
OP_FIELDS = ("calls", "device_total_ns", "self_device_ns", "cpu_total_ns", "self_cpu_ns")
KERNEL_FIELDS = ("calls", "total_ns")
KERNEL_TABLE = pa.schema([("name", pa.string()), ("calls", pa.int64()), ("total_ns", pa.int64())])
# A run whose busiest device is busy less than this share of the time is host-bound: its device time
# says little about its speed (the host sets the pace), so the headline never reads it as speed.
HOST_BOUND_BUSY_PCT = 50.0


@dataclass
class RunOps:
    """One run's side of a comparison: its per-name op table and (optionally) kernel table."""

    id: str
    name: str
    ops: pa.Table  # per-name op table (explorer.model.tables.OP_STATS)
    device_total_ns: int
    tags: Sequence[str] = ()
    kernels: pa.Table | None = None  # KERNEL_TABLE, from kernel_table(slices); None: no kernels
    span_ns: int = 0  # the run's span (wall time); 0: unknown (a rank of a run)
    step_ns: int | None = None  # median step (median_step_ns); None: no steps
    step_count: int = 0
    step_annotation: str = ""
    busy_pct: float | None = None  # the busiest device's busy %; None: unknown or no device
    devices: Sequence[Mapping[str, Any]] = ()  # RunSummary.devices: [{"name", "count", ...}]
    world_size: int | None = None


@dataclass(frozen=True)
class Baseline:
    """Which run (by position in the link) is the baseline, and why: `chosen` (baseline= in the link),
    `tagged` (tagged baseline/before; `tag` says which) or `first` (the first run in the link)."""

    index: int
    reason: str
    tag: str = ""


def choose_baseline(ids: Sequence[str], tags: Sequence[Sequence[str]], chosen: str | None = None) -> Baseline:
    """The baseline rule, the one place it is written: a run chosen explicitly (the link's `baseline=`:
    the run picked first on the runs page, or made baseline on the compare page) wins; else the first run
    in the link tagged `baseline` or `before` (case-insensitive); else the first run in the link."""
    if chosen:
        if chosen not in ids:
            raise BadRequest(f"baseline {chosen!r} is not one of the compared runs")
        return Baseline(list(ids).index(chosen), "chosen")
    for i, run_tags in enumerate(tags):
        for tag in run_tags:
            if tag.strip().lower() in BASELINE_TAGS:
                return Baseline(i, "tagged", tag)
    return Baseline(0, "first")


def baseline_first(items: Sequence[Any], baseline: Baseline) -> list[Any]:
    """`items` (in link order) with the baseline's moved to the front, the others keeping their order."""
    return [items[baseline.index], *(x for i, x in enumerate(items) if i != baseline.index)]


def pct_change(base: int, new: int) -> float | None:
    return None if base == 0 else 100.0 * (new - base) / base


def median_step_ns(steps: StepsResult) -> int | None:
    """The median step duration (the lower median: an exact ns of one step), None without steps. Rows that
    carry a `rank` are one rank's share of a step: a step lasts until its last rank ends it (the longest
    row of its name)."""
    rows = steps["steps"]
    if not rows:
        return None
    if all("rank" in r for r in rows):
        longest: dict[str, int] = {}
        for r in rows:
            longest[r["name"]] = max(longest.get(r["name"], 0), int(r["dur_ns"]))
        durations = sorted(longest.values())
    else:
        durations = sorted(int(r["dur_ns"]) for r in rows)
    return durations[(len(durations) - 1) // 2]


def ops_metric(runs: Sequence[Mapping[str, Any]]) -> str:
    """The op table's time: device time when any run has some, else CPU time (summed self CPU)."""
    return "device_total_ns" if any(r.get("device_total_ns") for r in runs) else "cpu_total_ns"


def headline_metric(runs: Sequence[Mapping[str, Any]]) -> str:
    """The headline: the median step when every run has steps, else the span (wall time) when every run
    has one, else (ranks of one run) the op table's time."""
    if runs and all(r.get("step_ns") is not None for r in runs):
        return "step_ns"
    if runs and all(r.get("span_ns") for r in runs):
        return "span_ns"
    return ops_metric(runs)


def _figure(runs: Sequence[Mapping[str, Any]], metric: str) -> HeadlineFigure:
    totals = [int(r[metric]) for r in runs]
    base = totals[0] if totals else 0
    return {"metric": metric, "totals_ns": totals, "deltas_ns": [t - base for t in totals],
            "pct_change": [pct_change(base, t) for t in totals]}


def compute_headline(runs: Sequence[Mapping[str, Any]]) -> Headline:
    """The headline metric per run (baseline first), its delta and % change against the baseline; the
    op table's time (device, else CPU) as `secondary` when the headline is a step or span; each run's
    busiest-device busy % and whether it is host-bound (busy under HOST_BOUND_BUSY_PCT). The page and
    /api/compare both show this one object."""
    metric = headline_metric(runs)
    second = ops_metric(runs)
    busy = [None if r.get("busy_pct") is None else float(r["busy_pct"]) for r in runs]
    head = _figure(runs, metric)
    return {"baseline": runs[0]["id"] if runs else None, "metric": metric, "totals_ns": head["totals_ns"],
            "deltas_ns": head["deltas_ns"], "pct_change": head["pct_change"],
            "secondary": _figure(runs, second) if second != metric else None, "busy_pct": busy,
            "host_bound": [b is not None and b < HOST_BOUND_BUSY_PCT for b in busy]}


def _device_models(side: Mapping[str, Any]) -> list[str]:
    return sorted({str(d.get("name", "")) for d in side.get("devices", []) if d.get("name")})


def compare_warnings(sides: Sequence[Mapping[str, Any]]) -> list[CompareWarning]:
    """What makes the runs unlike (baseline first): device models, world sizes, step counts or step
    annotations that differ between a run and the baseline. Each names the runs' values."""
    out: list[CompareWarning] = []
    checks: tuple[tuple[str, str, Any], ...] = (
        ("devices", "the runs ran on different devices", lambda s: ", ".join(_device_models(s)) or "not recorded"),
        ("world_size", "the runs have different world sizes", lambda s: s.get("world_size")),
        ("step_count", "the runs have different numbers of steps", lambda s: s.get("step_count", 0)),
        ("step_annotation", "the runs mark their steps differently", lambda s: s.get("step_annotation", "")),
    )
    for code, what, value in checks:
        values = [value(s) for s in sides]
        if any(v != values[0] for v in values[1:]):
            out.append({"code": code, "message": what + ": " + "; ".join(f"{s['name']}: {v}" for s, v in
                                                                        zip(sides, values, strict=True))})
    return out


def _status(base: Mapping[str, int] | None, run: Mapping[str, int] | None) -> str:
    """A name's status in one run against the baseline."""
    if base is None:
        return "added" if run is not None else "absent"
    if run is None:
        return "removed"
    return "common" if base["calls"] == run["calls"] else "changed"


def _row_status(statuses: Sequence[str]) -> str:
    """One status for a row across all non-baseline runs (two runs: that run's status)."""
    if "added" in statuses:
        return "added"
    if "removed" in statuses:
        return "removed"
    return "changed" if "changed" in statuses else "common"


def diff_rows(ids: Sequence[str], tables: Sequence[Mapping[str, Mapping[str, int]]], fields: Sequence[str],
              pct_field: str) -> list[DiffRow]:
    """Rows per name over `tables` (name -> field -> int, baseline first): each run's values (None where
    the name is absent), and per non-baseline run its status and the delta of every field against the
    baseline (an absent side counts as 0), with the % change of `pct_field`. Unsorted."""
    rows: list[DiffRow] = []
    for name in sorted({n for t in tables for n in t}):
        per_run = [dict(t[name]) if name in t else None for t in tables]
        base = per_run[0]
        vs = []
        for rid, run in zip(ids[1:], per_run[1:], strict=True):
            delta: dict[str, Any] = {f: (run[f] if run else 0) - (base[f] if base else 0) for f in fields}
            delta.update(run=rid, status=_status(base, run),
                         pct_change=pct_change(base[pct_field], run[pct_field] if run else 0) if base else None)
            vs.append(delta)
        rows.append({"name": name, "status": _row_status([v["status"] for v in vs]), "per_run": per_run,
                     "vs_baseline": vs})
    return rows


def sort_by_largest_delta(rows: list[DiffRow], field: str) -> list[DiffRow]:
    """Largest |Δ field| over the non-baseline runs first; ties by the largest value in any run, then name."""
    def key(row: DiffRow) -> tuple[int, int, str]:
        delta = max((abs(int(v[field])) for v in row["vs_baseline"]), default=0)
        size = max((int(p[field]) for p in row["per_run"] if p), default=0)
        return (-delta, -size, row["name"])

    return sorted(rows, key=key)


def _op_dicts(ops: pa.Table) -> dict[str, dict[str, int]]:
    return {r["name"]: {k: int(r[k]) for k in OP_FIELDS} for r in ops.select(["name", *OP_FIELDS]).to_pylist()}


def compute_compare(runs: list[RunOps], baseline: str | None = None) -> CompareResult:
    """Ops and kernels of `runs` (in link order) against the baseline `choose_baseline` picks; the result
    lists the baseline first. Rows are sorted by the largest |Δ self device| (|Δ self CPU| host-only)."""
    choice = choose_baseline([r.id for r in runs], [r.tags for r in runs], baseline)
    ordered = baseline_first(runs, choice)
    ids = [r.id for r in ordered]
    tables = [_op_dicts(r.ops) for r in ordered]
    # a run's CPU time is the sum of self CPU: op totals nest (an op's total includes its children's)
    sides: list[CompareSide] = [_side(r, t) for r, t in zip(ordered, tables, strict=True)]
    headline = compute_headline(sides)
    device = ops_metric(sides) == "device_total_ns"
    rows = diff_rows(ids, tables, OP_FIELDS, ops_metric(sides))
    return {
        "baseline": {"id": ids[0], "reason": choice.reason, "tag": choice.tag},
        "runs": sides,
        "headline": headline,
        "warnings": compare_warnings(sides),
        "sort": "self_device_ns" if device else "self_cpu_ns",
        "rows": sort_by_largest_delta(rows, "self_device_ns" if device else "self_cpu_ns"),
        "kernels": compute_kernel_compare(ids, [r.kernels for r in ordered]),
    }


def _side(r: RunOps, ops: Mapping[str, Mapping[str, int]]) -> CompareSide:
    return {"id": r.id, "name": r.name, "tags": list(r.tags), "device_total_ns": int(r.device_total_ns),
            "cpu_total_ns": sum(p["self_cpu_ns"] for p in ops.values()), "span_ns": int(r.span_ns),
            "step_ns": r.step_ns, "step_count": int(r.step_count), "step_annotation": r.step_annotation,
            "busy_pct": r.busy_pct, "devices": [dict(d) for d in r.devices], "world_size": r.world_size}


def kernel_table(slices: pa.Table) -> pa.Table:
    """Device executions (slices with device_time) grouped by name: calls and total_ns (KERNEL_TABLE)."""
    dev = slices.filter(pc.fill_null(slices.column("device_time"), False)).select(["name", "dur_ns"])
    if dev.num_rows == 0:
        return KERNEL_TABLE.empty_table()
    g = dev.group_by("name").aggregate([("dur_ns", "count"), ("dur_ns", "sum")])
    return pa.table({"name": g.column("name"), "calls": g.column("dur_ns_count").cast(pa.int64()),
                     "total_ns": g.column("dur_ns_sum").cast(pa.int64())}, schema=KERNEL_TABLE)


def compute_kernel_compare(ids: Sequence[str], kernels: Sequence[pa.Table | None]) -> KernelCompare:
    """Kernels per name across runs (baseline first): calls and total_ns per run, status and Δ per
    non-baseline run, sorted by the largest |Δ total_ns|."""
    tables: list[dict[str, dict[str, int]]] = []
    for table in kernels:
        rows = [] if table is None else table.select(["name", *KERNEL_FIELDS]).to_pylist()
        tables.append({r["name"]: {k: int(r[k]) for k in KERNEL_FIELDS} for r in rows})
    totals: list[KernelTotals] = [{"id": rid, "calls": sum(p["calls"] for p in t.values()),
               "total_ns": sum(p["total_ns"] for p in t.values())}
              for rid, t in zip(ids, tables, strict=True)]
    rows = diff_rows(ids, tables, KERNEL_FIELDS, "total_ns")
    return {"runs": totals, "rows": sort_by_largest_delta(rows, "total_ns")}
