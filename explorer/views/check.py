"""The regression gate over stored runs: two run references -> the numbers of each -> compute_check.

Shared by `trace-explorer check` and GET /api/check, so both give the same rows. The metric rules are
explorer/analysis/check.py's; the references are explorer/runs/refs.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pyarrow.compute as pc

from explorer.analysis.check import DEFAULT_MAX_REGRESSION, CheckSide, compute_check, parse_threshold
from explorer.analysis.compare import kernel_table
from explorer.model.shapes import CheckResult
from explorer.runs.refs import REF_HELP, resolve_run_ref
from explorer.store.catalog.catalog import RunRecord
from explorer.store.queries import DEFAULT_OP_VIEW, op_table, run_device_total_ns, select_op_view
from explorer.store.runs import RunStore
from explorer.views.memory import run_peak_memory

STEP_ROW = "ProfilerStep*"  # key_averages()' one row for every ProfilerStep#N


def load_check_side(store: RunStore, rec: RunRecord, kernels: bool = False) -> CheckSide:
    """A ready run's numbers for the gate, from its operators view (and its kernel table when asked)."""
    ops = select_op_view(op_table(store, rec.id), DEFAULT_OP_VIEW)
    rows = ops.select(["name", "calls", "cpu_total_ns", "self_cpu_ns", "device_total_ns"]).to_pylist()
    step = next(((int(r["calls"]), int(r["cpu_total_ns"])) for r in rows if r["name"] == STEP_ROW), None)
    kernel_ns: dict[str, int] = {}
    if kernels:
        table = kernel_table(store.table(rec.id, "slices"))
        kernel_ns = dict(zip(table.column("name").to_pylist(), table.column("total_ns").to_pylist(), strict=True))
    return CheckSide(rec.id, rec.name, run_device_total_ns(rec), int(pc.sum(ops.column("self_cpu_ns")).as_py() or 0),
                     step if step and step[0] else None,
                     {r["name"]: int(r["device_total_ns"]) for r in rows},
                     {r["name"]: int(r["cpu_total_ns"]) for r in rows}, kernel_ns)


def compute_run_check(store: RunStore, baseline: str, candidate: str, metrics: Sequence[str] = (),
                      max_regression: str = DEFAULT_MAX_REGRESSION) -> CheckResult:
    """The check of `candidate` against `baseline` (run refs: ids or tag:NAME@latest)."""
    threshold = parse_threshold(max_regression)
    kernels = any(m.startswith("kernel:") for m in metrics)
    sides = [load_check_side(store, resolve_run_ref(store, ref), kernels) for ref in (baseline, candidate)]
    if "peak_memory" in metrics:
        sides = [replace(side, peak_memory_bytes=run_peak_memory(store, side.id)) for side in sides]
    return compute_check(sides[0], sides[1], metrics, threshold)


__all__ = ["DEFAULT_MAX_REGRESSION", "REF_HELP", "compute_run_check"]
