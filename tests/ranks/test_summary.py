"""The per-rank summary and the straggler rule against the truth from the raw JSON (tests/ranks/truth.py):
the constructed 4-rank NCCL trace with rank 2 5 ms late to every all-reduce, a rank missing a collective,
and a real 2-rank gloo capture with rank 1 late to every all_reduce."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.synth_ranks import KERNELS, NCCL_KERNEL
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.ranks import compute_run_rank_compare
from tests.ranks.conftest import GLOO_LATE_RANK, STRAGGLER
from tests.ranks.truth import lateness, rank_truth


def _check_against_truth(rows: list[Any], truths: list[dict[str, Any]]) -> None:
    for row, truth in zip(rows, truths, strict=True):
        assert [(s["name"], s["dur_ns"]) for s in row["steps"]] == truth["steps"]
        assert row["step_time_ns"] == truth["step_time_ns"]
        assert row["window_ns"] == truth["window_ns"]
        assert row["comm_ns"] == truth["comm_ns"]
        assert row["compute_ns"] == truth["compute_ns"]
        assert row["idle_ns"] == truth["window_ns"] - truth["busy_ns"]


def test_constructed_straggler(straggler_traces: list[Path], rank_runs: dict[str, Any]) -> None:
    body = rank_runs["client"].get(f"/api/runs/{rank_runs['straggler']}/ranks").json()
    rows = body["ranks"]
    truths = [rank_truth(p, device=True) for p in straggler_traces]
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    _check_against_truth(rows, truths)
    late = lateness(truths, NCCL_KERNEL)
    assert late == [0, 0, STRAGGLER.late_ns, 0]
    assert [r["arrival_late_ns"] for r in rows] == late
    assert body["stragglers"] == [2] and body["unmatched"] == []
    evidence = rows[2]["evidence"]
    sgemm = KERNELS[0]
    # the collectives page's matching: rank 2 is the last arriver of every all-reduce (3 matched by Seq)
    assert [(r["last_arrivals"], r["matched_collectives"]) for r in rows] == [(0, 3), (0, 3), (3, 3), (0, 3)]
    assert (body["latest_arriver"], body["matched_collectives"]) == (2, STRAGGLER.steps)
    assert evidence == {"rule": "arrival", "late_ns": 5_000_000, "collective": "allreduce", "kind": "kernel",
                        "name": sgemm, "rank": 2, "reference_rank": 0,
                        "excess_ns": truths[2]["totals"][sgemm] - truths[0]["totals"][sgemm]}
    assert evidence["excess_ns"] == STRAGGLER.steps * STRAGGLER.late_ns
    # everyone else waits for rank 2 inside the all-reduce: their communication is 5 ms a step longer, all exposed
    assert all(r["exposed_comm_ns"] == r["comm_ns"] and r["hidden_comm_ns"] == 0 for r in rows)
    assert rows[0]["comm_ns"] - rows[2]["comm_ns"] == STRAGGLER.steps * STRAGGLER.late_ns


def test_a_rank_missing_a_collective_is_reported_not_paired(rank_runs: dict[str, Any]) -> None:
    body = rank_runs["client"].get(f"/api/runs/{rank_runs['missing']}/ranks").json()
    # as the collectives page says it: matched by Seq, rank 3 lacks seq 1 (the others still match)
    assert body["unmatched"] == [{"name": "allreduce", "counts": [{"rank": 0, "count": 1}, {"rank": 1, "count": 1},
                                                                  {"rank": 2, "count": 1}, {"rank": 3, "count": 0}],
                                  "message": "allreduce in group 0 (seq 1): ranks 3 lack it"}]
    assert body["matched_collectives"] == 2
    assert body["stragglers"] == [] and all(r["arrival_late_ns"] == 0 for r in body["ranks"])


def test_rank_compare_defaults_to_the_straggler_against_the_median_rank(rank_runs: dict[str, Any]) -> None:
    client, run = rank_runs["client"], rank_runs["straggler"]
    body = client.get(f"/api/runs/{run}/ranks/compare").json()
    assert (body["a"], body["b"], body["reason"]) == (2, 0, "slowest vs median")
    kernels = {r["name"]: r["vs_baseline"][0]["total_ns"] for r in body["compare"]["kernels"]["rows"]}
    assert kernels[KERNELS[0]] == STRAGGLER.steps * STRAGGLER.late_ns
    assert kernels[NCCL_KERNEL] == -STRAGGLER.steps * STRAGGLER.late_ns  # rank 0 waited that much longer
    chosen = client.get(f"/api/runs/{run}/ranks/compare?a=1&b=3").json()
    assert (chosen["a"], chosen["b"], chosen["reason"]) == (1, 3, "chosen")
    assert all(r["vs_baseline"][0]["total_ns"] == 0 for r in chosen["compare"]["kernels"]["rows"])


@pytest.mark.parametrize(("query", "message"), [("a=1&b=1", "two different ranks"), ("a=9", "no rank 9"),
                                                ("a=-1", ""), ("b=x", "")])
def test_rank_compare_bad_input(rank_runs: dict[str, Any], query: str, message: str) -> None:
    r = rank_runs["client"].get(f"/api/runs/{rank_runs['straggler']}/ranks/compare?{query}")
    assert r.status_code in (400, 422), r.text
    assert message in r.text


def test_single_rank_run(rank_runs: dict[str, Any]) -> None:
    client, run = rank_runs["client"], rank_runs["single"]
    body = client.get(f"/api/runs/{run}/ranks").json()
    assert [r["rank"] for r in body["ranks"]] == [2] and body["stragglers"] == []
    r = client.get(f"/api/runs/{run}/ranks/compare")
    assert r.status_code == 400 and "two or more ranks" in r.json()["error"]["message"]


@pytest.mark.slow
def test_real_gloo_capture(store: RunStore, gloo_capture: list[Path]) -> None:
    """torch.distributed gloo on CPU, 2 ranks: host-mode numbers equal the raw JSON's; rank 1, which sleeps in
    `late_input_wait` before each all_reduce, is the straggler with that annotation as evidence."""
    rec = ingest_paths(store, gloo_capture)
    body = Run.of(store, rec.id).ranks()
    rows = body["ranks"]
    truths = [rank_truth(p, device=False) for p in gloo_capture]
    assert [r["rank"] for r in rows] == [0, 1] and {r["mode"] for r in rows} == {"host"}
    assert {r["host"] for r in rows} == {json.loads(gloo_capture[0].read_text())["host_name"]}  # torch's host_name
    _check_against_truth(rows, truths)
    assert body["stragglers"] == [GLOO_LATE_RANK] and body["latest_arriver"] == GLOO_LATE_RANK
    evidence = rows[GLOO_LATE_RANK]["evidence"]
    assert evidence is not None and evidence["rule"] == "arrival"
    assert evidence["late_ns"] == max(lateness(truths, name)[GLOO_LATE_RANK] for name in truths[0]["arrivals"])
    assert (evidence["kind"], evidence["name"]) == ("op", "late_input_wait")
    assert evidence["excess_ns"] == truths[GLOO_LATE_RANK]["totals"]["late_input_wait"]
    compare = compute_run_rank_compare(Run.of(store, rec.id))
    assert (compare["a"], compare["b"]) == (GLOO_LATE_RANK, 0)


def test_ranks_without_steps_use_their_own_span(tmp_path: Path) -> None:
    """A rank with no ProfilerStep: its window is its own first to last event (not from 0 ns of the epoch), idle
    the window less its device busy time, both read from the files with plain integer arithmetic."""
    base_us = 1_700_000_000_000_000  # an epoch time in µs, as Kineto writes it
    files, expected = [], {}
    for rank in (0, 1):
        t0 = base_us + 50 * rank
        kernels = [(t0 + 10, 20), (t0 + 40, 30 + rank)]
        events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0, "dur": 100},
                  *({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts, "dur": dur}
                    for ts, dur in kernels)]
        path = tmp_path / f"rank{rank}.json"
        path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": rank, "world_size": 2}}))
        files.append(path)
        window = (max(t0 + 100, *(ts + d for ts, d in kernels)) - t0) * 1000
        expected[rank] = (window, window - sum(d for _, d in kernels) * 1000)
    store = RunStore(tmp_path / "data")
    run_id = ingest_paths(store, files, "no steps").id
    rows = {r["rank"]: r for r in Run.of(store, run_id).ranks()["ranks"]}
    assert {k: (r["window_ns"], r["idle_ns"]) for k, r in rows.items()} == expected
