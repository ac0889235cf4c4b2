"""Steps per rank on real multi-rank pairs from ../shared/traces (HTA's sampled rank 0 + rank 1, and its
trace_diff control (rank 3) + test (rank 1) uploaded as one run): each (rank, step) row equals a json +
Decimal reading of that rank's own file (its device executions clipped to its own ProfilerStep windows, by
a sweep line: tests/analysis/test_steps.py), and the Ranks page's per-rank numbers are the sums of its rows."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.analysis.steps import STEP_PARTS
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from tests.analysis.test_steps import expected_steps

HTA = "HolisticTraceAnalysis/tests/data/"
PAIRS = {"sampled": (HTA + "timeline_analysis/sampled_rank-0.json.gz", HTA + "trace_filter/sampled_rank-1.json.gz"),
         "trace_diff": (HTA + "trace_diff/control/control.json.gz", HTA + "trace_diff/test/test.json.gz")}


def read_doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    return doc


@pytest.mark.shared
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_steps_per_rank_equal_each_ranks_own_file(store: RunStore, shared_traces: Path, pair: str) -> None:
    paths = [shared_traces / p for p in PAIRS[pair]]
    docs = [read_doc(p) for p in paths]
    want = {int(d["distributedInfo"]["rank"]): expected_steps(d["traceEvents"]) for d in docs}
    rec = ingest_paths(store, paths)
    got = Run.of(store, rec.id).steps()
    assert got["ranks"] == sorted(want)
    assert got["count"] == sum(len(v) for v in want.values())
    parts = (*STEP_PARTS, "idle")
    for rank, steps in want.items():
        rows = [r for r in got["steps"] if r["rank"] == rank]
        assert [(r["name"], r["dur_ns"]) for r in rows] == [(s["name"], s["dur_ns"]) for s in steps]
        assert [r["start"] - rows[0]["start"] for r in rows] == [s["ts"] - steps[0]["ts"] for s in steps]
        for row, exp in zip(rows, steps, strict=True):
            assert {p: row[f"{p}_ns"] for p in parts} == {p: exp[p] for p in parts}, (rank, row["name"])
    # a rank's numbers on the Ranks page are the sums of its rows (its steps do not overlap)
    ranks = Run.of(store, rec.id).ranks()
    colls = Run.of(store, rec.id).collectives().rows
    waited: Counter[int] = Counter()
    for c in colls:
        if len(c["ranks"]) > 1:
            waited[c["last_arriver"]] += c["wait_ns"]
    if waited:  # the latest arriver is the Collectives page's last arriver the others waited longest for
        assert waited[ranks["latest_arriver"]] == max(waited.values()), (waited, ranks["latest_arriver"])
    if pair == "trace_diff":  # two separate jobs (ranks 3 and 1 of different worlds, days apart on the clock):
        assert (ranks["matched_steps"], ranks["step_start_skew_ns"]) == (0, 0)  # their step starts are not compared
    else:
        assert ranks["matched_steps"] == len(want[0]) > 0
    for row in ranks["ranks"]:
        mine = [s for s in got["steps"] if s["rank"] == row["rank"]]
        assert all(a["end"] <= b["start"] for a, b in zip(mine, mine[1:], strict=False))
        assert (row["compute_ns"], row["exposed_comm_ns"], row["idle_ns"], row["window_ns"]) == (
            sum(s["compute_ns"] for s in mine), sum(s["communication_ns"] for s in mine),
            sum(s["idle_ns"] for s in mine), sum(s["dur_ns"] for s in mine))
