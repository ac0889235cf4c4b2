"""Collectives on real captures: a 2-rank gloo job made here with torch.distributed (rank 1 sleeps before
every all_reduce), HTA's single-rank NCCL trace (the collective list and sizes against its raw args) and
HTA's sampled rank-0 / rank-1 pair. Expected values are read from the raw JSON with decimal arithmetic."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.collectives import collectives_json
from tests.analysis.collectives.conftest import GLOO_LATE_RANK, GLOO_SLEEP_S, GLOO_STEPS

HTA = "HolisticTraceAnalysis/tests/data"
NCCL = f"{HTA}/nccl_parser_config/nccl_data.json.gz"
SAMPLED = (f"{HTA}/timeline_analysis/sampled_rank-0.json.gz", f"{HTA}/trace_filter/sampled_rank-1.json.gz")
ELEMENT_BYTES = {"Float": 4, "Long": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Byte": 1, "float": 4}


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
    return doc


def abs_ns(doc: dict[str, Any], ts: Any) -> int:
    return int(doc.get("baseTimeNanoseconds", 0)) + int(Decimal(str(ts)) * 1000)


def test_gloo_all_reduces_matched_and_the_sleeping_rank_is_last(colls_store: RunStore, gloo_traces: list[Path]) -> None:
    rec = ingest_paths(colls_store, gloo_traces, "gloo 2 ranks")
    origin = rec.summary.start_ns
    result = collectives_json(Run.of(colls_store, rec.id).collectives(), sort="+start_ns")
    assert result["mismatches"] == [] and result["ranks"] == [0, 1]
    raw: dict[int, dict[str, list[tuple[int, int, int]]]] = {}
    for path in gloo_traces:
        doc = load(path)
        ev = doc["traceEvents"]
        calls: dict[str, list[tuple[int, int, int]]] = {}
        for op, execution in (("allreduce", "gloo:all_reduce"), ("allgather", "gloo:all_gather")):
            arrivals = sorted(abs_ns(doc, e["ts"]) for e in ev if e.get("name") == f"c10d::{op}_")
            runs = sorted((abs_ns(doc, e["ts"]), abs_ns(doc, e["ts"]) + int(Decimal(str(e["dur"])) * 1000))
                          for e in ev if e.get("name") == execution)
            assert len(arrivals) == len(runs) == GLOO_STEPS
            calls[op] = [(a, s, e) for a, (s, e) in zip(arrivals, runs, strict=True)]
        raw[doc["distributedInfo"]["rank"]] = calls
    rows = {op: [r for r in result["rows"] if r["name"] == op] for op in ("allreduce", "allgather")}
    assert len(rows["allreduce"]) == len(rows["allgather"]) == GLOO_STEPS
    assert [r["name"] for r in result["rows"]].count("barrier") == 1 and result["total"] == 2 * GLOO_STEPS + 1
    for k, row in enumerate(rows["allreduce"]):
        arrival = {r: raw[r]["allreduce"][k][0] for r in raw}
        last = max(arrival.values())
        assert row["last_arriver"] == GLOO_LATE_RANK, (k, row["ranks"])
        assert {x["rank"]: x["wait_ns"] for x in row["ranks"]} == {r: last - a for r, a in arrival.items()}
        assert {x["rank"]: (x["arrival_ns"], x["start_ns"], x["end_ns"]) for x in row["ranks"]} == {
            r: tuple(t - origin for t in raw[r]["allreduce"][k]) for r in raw}
        ends, starts = [raw[r]["allreduce"][k][2] for r in raw], [raw[r]["allreduce"][k][1] for r in raw]
        assert row["transfer_ns"] == max(0, max(ends) - max(starts))
        assert row["size_bytes"] == 1024 * 4 and row["matched_by"] == "order"
    waited = sum(r["ranks"][0]["wait_ns"] for r in rows["allreduce"])
    assert waited >= GLOO_STEPS * GLOO_SLEEP_S * 1e9 / 2  # rank 0 spent (most of) rank 1's sleeps waiting
    for row in rows["allgather"]:
        assert row["size_bytes"] == 256 * 4 * 2  # each rank's 256 floats, gathered from 2 ranks


@pytest.mark.shared
def test_nccl_single_rank_list_and_sizes(colls_store: RunStore, shared_traces: Path) -> None:
    path = shared_traces / NCCL
    doc = load(path)
    kernels = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                     key=lambda e: Decimal(str(e["ts"])))
    rec = ingest_paths(colls_store, [path], "nccl rank 0")
    result = collectives_json(Run.of(colls_store, rec.id).collectives(), sort="+start_ns")
    assert result["ranks"] == [0] and result["mismatches"] == []
    assert len(result["rows"]) == len(kernels) == 21
    origin = rec.summary.start_ns
    for row, k in zip(result["rows"], kernels, strict=True):
        a = k["args"]
        assert row["name"] == a["Collective name"] and row["process_group"] == a["Process Group Name"]
        assert row["size_bytes"] == max(a["In msg nelems"], a["Out msg nelems"]) * ELEMENT_BYTES[a["dtype"]]
        [me] = row["ranks"]
        start = abs_ns(doc, k["ts"])
        assert (me["start_ns"], me["end_ns"]) == (start - origin, start + int(Decimal(str(k["dur"])) * 1000) - origin)
        assert row["transfer_ns"] == me["end_ns"] - me["start_ns"] and row["wait_ns"] == 0
        assert me["arrival_ns"] < me["start_ns"]  # the cudaLaunchKernel before it
        assert row["busbw"] is not None and row["algbw"] is not None
    assert {r["name"] for r in result["rows"]} == {"allreduce", "broadcast"}


@pytest.mark.shared
def test_sampled_rank_pair_matched_by_order(colls_store: RunStore, shared_traces: Path) -> None:
    """HTA's sampled rank-0 and rank-1 each keep 10 SendRecv kernels without collective args: they pair
    by order (honestly labelled `order`); the sampling means the pairs need not be the same call."""
    paths = [shared_traces / p for p in SAMPLED]
    counts = [sum(1 for e in load(p)["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
              for p in paths]
    rec = ingest_paths(colls_store, paths, "sampled pair")
    result = collectives_json(Run.of(colls_store, rec.id).collectives())
    assert counts == [10, 10] and result["total"] == 10 and result["ranks"] == [0, 1]
    assert {r["matched_by"] for r in result["rows"]} == {"order"} and {r["name"] for r in result["rows"]} == {"sendrecv"}
    assert all(r["size_bytes"] is None and r["busbw"] is None for r in result["rows"])
