"""Memory on the compare page (`/compare` and its twin `/api/compare`): each run's peaks against the baseline's and
the change by owner op and by module, from the runs' memory reports (explorer/views/memory_data.py). The breakdowns
are cut to the biggest changes with the rest summed in one row, so that they still sum to the peak's change."""

from __future__ import annotations

from explorer.analysis.memory import compare_peaks
from explorer.model.shapes import MemoryCompare, MemoryOwnerDelta, MemoryPeakDelta
from explorer.store.runs import RunStore
from explorer.views.memory_data import compute_run_memory

TOP_DELTAS = 12  # owners (and modules) listed by name per device; the rest are one OTHER_OWNERS row
OTHER_OWNERS = "(other owners)"


def compute_compare_memory(store: RunStore, run_ids: list[str]) -> list[MemoryCompare]:
    """Each run after the first (the baseline) against it, for the runs with [memory] events; [] when the
    baseline has none."""
    baseline = compute_run_memory(store, run_ids[0])["report"]
    if baseline is None:
        return []
    out: list[MemoryCompare] = []
    for run_id in run_ids[1:]:
        report = compute_run_memory(store, run_id)["report"]
        if report is not None:
            out.append(MemoryCompare(run_id=run_id, baseline_id=run_ids[0],
                                     peaks=[_cut(p) for p in compare_peaks(report, baseline)]))
    return out


def _cut(peak: MemoryPeakDelta) -> MemoryPeakDelta:
    return {**peak, "by_owner": cut_deltas(peak["by_owner"]), "by_module": cut_deltas(peak["by_module"])}


def cut_deltas(rows: list[MemoryOwnerDelta], top: int = TOP_DELTAS) -> list[MemoryOwnerDelta]:
    """The first `top` rows (biggest change first) and one row summing the rest (when there is a rest)."""
    if len(rows) <= top + 1:
        return rows
    rest = rows[top:]
    return [*rows[:top], MemoryOwnerDelta(owner=OTHER_OWNERS, bytes=sum(r["bytes"] for r in rest),
                                          baseline_bytes=sum(r["baseline_bytes"] for r in rest),
                                          delta=sum(r["delta"] for r in rest))]
