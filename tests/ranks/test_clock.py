"""Clock alignment across hosts: ranks on one host keep their times; a host whose clock is off by more than the
traces' own skew is aligned on the first collective, with a warning naming the offset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.synth_ranks import NCCL_KERNEL, RankPlan, write_rank_traces
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

PLAN = RankPlan(world=4, steps=2, units=2)
OFF_NS = 7_000_000_123


def _on_hosts(tmp: Path, hosts: list[str], shift_ns: dict[int, int]) -> list[Path]:
    """The plan's traces renamed `<host>_<pid>.<ms>.pt.trace.json`, rank r's clock moved by shift_ns[r]."""
    out = []
    for r, path in enumerate(write_rank_traces(tmp / "t", PLAN)):
        doc = json.loads(path.read_text())
        doc["baseTimeNanoseconds"] += shift_ns.get(r, 0)
        dest = tmp / f"{hosts[r]}_{1000 + r}.1700000000000.pt.trace.json"
        dest.write_text(json.dumps(doc))
        out.append(dest)
    return out


def _allreduce_ends(store: RunStore, run_id: str) -> dict[int, list[int]]:
    tracks = {t["track_id"]: t["rank"] for t in store.table(run_id, "tracks").to_pylist()}
    slices = store.table(run_id, "slices").to_pylist()
    ends: dict[int, list[int]] = {}
    for s in slices:
        if s["name"] == NCCL_KERNEL:
            ends.setdefault(tracks[s["track_id"]], []).append(s["ts_ns"] + s["dur_ns"])
    return ends


def test_a_host_with_another_clock_is_aligned(store: RunStore, tmp_path: Path) -> None:
    paths = _on_hosts(tmp_path, ["node-a", "node-a", "node-b", "node-b"], {2: OFF_NS, 3: OFF_NS})
    rec = ingest_paths(store, paths)
    hosts = {(t["rank"], t["host"]) for t in store.table(rec.id, "tracks").to_pylist()}
    assert hosts == {(0, "node-a"), (1, "node-a"), (2, "node-b"), (3, "node-b")}
    ends = _allreduce_ends(store, rec.id)
    assert ends[0] == ends[1] == ends[2] == ends[3]  # the all-reduce ends together on every rank again
    warnings = [w for w in rec.summary.warnings if w.code == "clock_aligned"]
    assert len(warnings) == 1 and f"{-OFF_NS:+,} ns" in warnings[0].message and "node-b" in warnings[0].message


@pytest.mark.parametrize("hosts", [["node-a"] * 4, ["node-a", "node-a", "node-b", "node-b"]])
def test_clocks_within_the_skew_are_left_alone(store: RunStore, tmp_path: Path, hosts: list[str]) -> None:
    """One host (shared clock), or two hosts 300 µs apart (under the 1 ms floor of the skew): no shift."""
    paths = _on_hosts(tmp_path, hosts, {2: 300_000, 3: 300_000})
    rec = ingest_paths(store, paths)
    ends = _allreduce_ends(store, rec.id)
    assert ends[2] == [e + 300_000 for e in ends[0]]
    assert not [w for w in rec.summary.warnings if w.code == "clock_aligned"]
