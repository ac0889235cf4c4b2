"""The distributed rules on the constructed 4-rank NCCL run (bench/synth_ranks.py: rank 2's first kernel of
every step 5 ms longer, so it arrives 5 ms late to every all-reduce): the straggler and the exposed
communication, their numbers recomputed from the rank files with plain json."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from bench.synth_ranks import NCCL_KERNEL, RankPlan, write_rank_traces
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.advice import compute_run_advice

PLAN = RankPlan(world=4, steps=3, units=4, late_rank=2, late_ns=5_000_000)


def kernels(path: Path) -> list[dict[str, object]]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel" and e["ph"] == "X"]


def ns(us: object) -> int:
    return int(Decimal(str(us)) * 1000)


def test_straggler_and_exposed_communication(store: RunStore, tmp_path: Path) -> None:
    paths = write_rank_traces(tmp_path, PLAN)
    advice = compute_run_advice(Run.of(store, ingest_paths(store, paths).id))
    by_rule = {f["rule"]: f for f in advice["findings"]}
    straggler = by_rule["straggler"]
    assert straggler["title"].startswith("Rank 2 ")
    assert straggler["saving_ns"] == PLAN.late_ns * PLAN.steps  # the others wait 5 ms for it at each step
    comm = {p.name: sum(ns(e["dur"]) for e in kernels(p) if e["name"] == NCCL_KERNEL) for p in paths}
    compute = {p.name: sum(ns(e["dur"]) for e in kernels(p) if e["name"] != NCCL_KERNEL) for p in paths}
    worst = max(comm, key=lambda k: comm[k])
    exposed = by_rule["exposed-communication"]
    assert exposed["acts_on_ns"] == comm[worst]  # nothing overlaps the all-reduce in this model
    assert exposed["saving_ns"] == min(comm[worst], compute[worst])
    assert {e["kind"] for e in exposed["evidence"]} == {"ranks", "collectives"}


def test_no_distributed_finding_on_balanced_compute_bound_ranks(store: RunStore, tmp_path: Path) -> None:
    """No late rank, and 200 kernels of 400 µs per step against a 2 ms all-reduce: under 1/20 exposed."""
    paths = write_rank_traces(tmp_path, RankPlan(world=4, steps=3, units=200))
    rules = {f["rule"] for f in compute_run_advice(Run.of(store, ingest_paths(store, paths).id))["findings"]}
    assert not rules & {"straggler", "exposed-communication"}
