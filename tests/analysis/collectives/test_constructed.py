"""Collectives matched across ranks on constructed NCCL runs: a 4-rank job where rank 2 launches every
all-reduce 5 ms late, a rank missing one collective (matched by Seq, and by order without Seq). Every
number is recomputed here from the raw trace JSON with integer arithmetic."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.collectives import collectives_json
from tests.analysis.collectives.synthetic import BASE_NS, KERNEL, straggler_calls, write_run


def raw_calls(files: list[Path]) -> dict[int, list[dict[str, int]]]:
    """rank -> its all-reduces from the raw JSON: launch (cudaLaunchKernel ts), kernel start/end, in ns."""
    out: dict[int, list[dict[str, int]]] = {}
    for f in files:
        doc = json.loads(f.read_text())
        ev = doc["traceEvents"]
        ns = lambda us: BASE_NS + int(Decimal(str(us)) * 1000)  # noqa: E731
        launches = {e["args"]["correlation"]: ns(e["ts"]) for e in ev if e.get("name") == "cudaLaunchKernel"}
        kernels = sorted((e for e in ev if e.get("name") == KERNEL), key=lambda e: Decimal(e["ts"]))
        out[doc["distributedInfo"]["rank"]] = [
            {"arrival": launches[k["args"]["correlation"]], "start": ns(k["ts"]), "end": ns(k["ts"]) + k["dur"] * 1000,
             "seq": k["args"].get("Seq", -1)} for k in kernels]
    return out


def test_rank_2_is_the_straggler_of_every_all_reduce(colls_store: RunStore, straggler_run: str,
                                                     straggler_files: list[Path]) -> None:
    origin = colls_store.get(straggler_run).summary.start_ns
    result = collectives_json(Run.of(colls_store, straggler_run).collectives(), sort="+seq")
    raw = raw_calls(straggler_files)
    assert result["mismatches"] == []
    assert result["ranks"] == [0, 1, 2, 3]
    assert [r["seq"] for r in result["rows"]] == [0, 1, 2, 3] and result["total"] == 4
    total = 0
    for row in result["rows"]:
        k = row["seq"]
        arrivals = {r: raw[r][k]["arrival"] for r in raw}
        last = max(arrivals.values())
        assert row["name"] == "allreduce" and row["process_group"] == "0" and row["matched_by"] == "seq"
        assert row["last_arriver"] == 2
        waits = {r: last - a for r, a in arrivals.items()}
        assert {x["rank"]: x["wait_ns"] for x in row["ranks"]} == waits
        assert waits[2] == 0 and min(w for r, w in waits.items() if r != 2) >= 4_900_000  # 5 ms late, minus its lead
        assert {x["rank"]: x["arrival_ns"] for x in row["ranks"]} == {r: a - origin for r, a in arrivals.items()}
        assert {x["rank"]: (x["start_ns"], x["end_ns"]) for x in row["ranks"]} == {
            r: (raw[r][k]["start"] - origin, raw[r][k]["end"] - origin) for r in raw}
        assert row["wait_ns"] == sum(waits.values())
        transfer = max(raw[r][k]["end"] for r in raw) - max(raw[r][k]["start"] for r in raw)
        assert row["transfer_ns"] == transfer == 800_000
        size = 1_048_576 * 4
        assert row["size_bytes"] == size and row["dtype"] == "Float"
        assert row["algbw"] == size / transfer
        assert row["busbw"] is not None and abs(row["busbw"] - size / transfer * 2 * 3 / 4) < 1e-12
        total += row["wait_ns"]
    assert result["total_wait_ns"] == total


def test_sort_and_limit(colls_store: RunStore, straggler_run: str) -> None:
    colls = Run.of(colls_store, straggler_run).collectives()
    by_wait = collectives_json(colls)["rows"]
    waits = [r["wait_ns"] for r in by_wait]
    assert waits == sorted(waits, reverse=True)
    assert [r["seq"] for r in collectives_json(colls, sort="-seq", limit=2)["rows"]] == [3, 2]
    assert collectives_json(colls, limit=0)["rows"] == [] and collectives_json(colls, limit=0)["total"] == 4


def _run(store: RunStore, folder: Path, calls: dict[int, Any], **kw: Any) -> str:
    return ingest_paths(store, write_run(folder, calls, **kw), folder.name).id


def test_missing_collective_is_reported_and_the_rest_matched_by_seq(colls_store: RunStore, tmp_path: Path) -> None:
    calls = {r: straggler_calls(r) for r in range(4)}
    calls[3] = [c for c in calls[3] if c.seq != 1]  # rank 3 never ran seq 1
    result = collectives_json(Run.of(colls_store, _run(colls_store, tmp_path / "gap", calls)).collectives(),
                              sort="+seq")
    assert [r["seq"] for r in result["rows"]] == [0, 2, 3]
    assert all(sorted(x["rank"] for x in r["ranks"]) == [0, 1, 2, 3] for r in result["rows"])
    assert all(r["last_arriver"] == 2 for r in result["rows"])
    [m] = result["mismatches"]
    assert (m["name"], m["seq"], m["ranks_present"], m["ranks_missing"]) == ("allreduce", 1, [0, 1, 2], [3])
    assert m["counts"] == {"0": 1, "1": 1, "2": 1, "3": 0} and "lack" in m["message"]


def test_without_seq_equal_counts_match_by_order(colls_store: RunStore, tmp_path: Path) -> None:
    calls = {r: straggler_calls(r) for r in range(4)}
    result = collectives_json(Run.of(colls_store, _run(colls_store, tmp_path / "order", calls,
                                                                        with_seq=False)).collectives(), sort="+seq")
    assert result["mismatches"] == [] and [r["seq"] for r in result["rows"]] == [0, 1, 2, 3]
    assert {r["matched_by"] for r in result["rows"]} == {"order"}
    assert {r["last_arriver"] for r in result["rows"]} == {2}


def test_without_seq_a_missing_collective_is_not_paired_by_order(colls_store: RunStore, tmp_path: Path) -> None:
    calls = {r: straggler_calls(r) for r in range(4)}
    calls[1] = calls[1][:-1]
    result = collectives_json(Run.of(colls_store, _run(colls_store, tmp_path / "short", calls,
                                                                        with_seq=False)).collectives())
    assert result["rows"] == [] and result["total"] == 0
    [m] = result["mismatches"]
    assert m["seq"] is None and m["counts"] == {"0": 4, "1": 3, "2": 4, "3": 4}
    assert "not paired" in m["message"]


def test_neuron_cc_slices_are_collectives(colls_store: RunStore) -> None:
    """The Neuron export fixture's `cc_running` device slice is the run's one collective, timed from its raw
    timestamp / duration (arrival = start: a cc_ slice has no launch call of its own)."""
    path = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "formats" / "neuron_export.json"
    [cc] = [e for e in json.loads(path.read_text())["trace_event"] if e["name"] == "cc_running"]
    rec = ingest_paths(colls_store, [path], "neuron cc")
    [row] = collectives_json(Run.of(colls_store, rec.id).collectives())["rows"]
    [me] = row["ranks"]
    start = cc["timestamp"] - rec.summary.start_ns
    assert (row["name"], me["arrival_ns"], me["start_ns"], me["end_ns"]) == ("ccrunning", start, start,
                                                                              start + cc["duration"])
    assert row["transfer_ns"] == cc["duration"] and row["size_bytes"] is None and row["busbw"] is None
