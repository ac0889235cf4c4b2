"""Compare runs op by op: calls, device and CPU time per run, delta and % change against the first.

The first run is the baseline. An op missing from the baseline is `added`; one in the baseline but
missing from a later run is `removed`; one in every run is `common`. Pure function over op tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

PER_RUN_FIELDS = ("calls", "device_total_ns", "self_device_ns", "cpu_total_ns", "self_cpu_ns")


@dataclass
class RunOps:
    """One run's side of a comparison."""

    id: str
    name: str
    ops: pa.Table  # per-name op table (explorer.model.tables.OP_STATS)
    device_total_ns: int


def pct_change(base: int, new: int) -> float | None:
    return None if base == 0 else 100.0 * (new - base) / base


def compute_compare(runs: list[RunOps]) -> dict[str, Any]:
    """Rows per op name across `runs`, plus a headline of total device time against the baseline."""
    tables: list[dict[str, dict[str, int]]] = []
    for run in runs:
        rows = run.ops.select(["name", *PER_RUN_FIELDS]).to_pylist()
        tables.append({r["name"]: {k: int(r[k]) for k in PER_RUN_FIELDS} for r in rows})
    names = sorted({n for t in tables for n in t},
                   key=lambda n: (-max(t.get(n, {}).get("device_total_ns", 0) for t in tables),
                                  -max(t.get(n, {}).get("cpu_total_ns", 0) for t in tables), n))
    rows_out = []
    for name in names:
        per_run = [t.get(name) for t in tables]
        dev = [p["device_total_ns"] if p else 0 for p in per_run]
        base = per_run[0]
        status = "added" if base is None else ("common" if all(per_run) else "removed")
        deltas = [d - dev[0] for d in dev]
        pcts = [pct_change(dev[0], d) if base is not None else None for d in dev]
        rows_out.append({"name": name, "status": status, "per_run": per_run,
                         "delta_device_ns": deltas[-1], "pct_change": pcts[-1],
                         "deltas_device_ns": deltas, "pct_changes": pcts})
    totals = [r.device_total_ns for r in runs]
    # a run's CPU time is the sum of self CPU: op totals nest (an op's total includes its children's)
    cpu = [sum(p["self_cpu_ns"] for p in t.values()) for t in tables]
    return {
        "runs": [{"id": r.id, "name": r.name, "device_total_ns": r.device_total_ns, "cpu_total_ns": c}
                 for r, c in zip(runs, cpu, strict=True)],
        "rows": rows_out,
        "headline": _headline(runs, totals),
    }


def _headline(runs: list[RunOps], totals: list[int]) -> dict[str, Any]:
    pcts = [pct_change(totals[0], t) for t in totals]
    parts = [f"{r.name}: {t / 1000:,.1f} µs device time" + (f" ({p:+.1f}%)" if p is not None and i else "")
             for i, (r, t, p) in enumerate(zip(runs, totals, pcts, strict=True))]
    return {"baseline": runs[0].id if runs else None, "device_total_ns": totals, "pct_change": pcts,
            "text": "; ".join(parts)}
