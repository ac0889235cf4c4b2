"""Rank identity at ingest, from each source: distributedInfo, file names, Neuron capture folders, and the
real multi-rank traces in ../shared/traces; labels `rank N · …`, tracks in rank order, the tracks API."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.synth_ranks import RankPlan, write_rank_traces
from explorer.ingest.ranks import host_of_name, rank_of_name
from explorer.model.ranks import NO_RANK, track_ranks
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.timeline import build_tracks

HTA = Path("HolisticTraceAnalysis/tests/data")
NEURON = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "capture_two_procs"


@pytest.mark.parametrize(("name", "rank"), [
    ("rank-3.pt.trace.json", 3), ("rank_3.json", 3), ("trace_rank_3.json.gz", 3), ("rank12.json", 12),
    ("worker3.1623143089861.pt.trace.json", 3), ("worker_7.json", 7), ("logs/rank-5/trace.json", 5),
    ("neuron_framework_trace_rank_5.json", 5), ("rank-34.Jul_15_10_52_41.1074.pt.trace.json", 34),
    ("ranking.json", NO_RANK), ("frank3.json", NO_RANK), ("trace.json", NO_RANK), ("host_1234.99.pt.trace.json", NO_RANK),
])
def test_rank_of_file_name(name: str, rank: int) -> None:
    assert rank_of_name(name) == rank


def test_host_of_tensorboard_file_name() -> None:
    assert host_of_name("node-a1_4242.1700000000000.pt.trace.json") == "node-a1"
    assert host_of_name("rank-3_4242.1700000000000.pt.trace.json") == ""  # a rank, not a host
    assert host_of_name("trace.json") == ""


def _tracks(store: RunStore, paths: list[Path]) -> pa.Table:
    rec = ingest_paths(store, paths)
    return store.table(rec.id, "tracks")


def test_file_names_give_ranks_without_distributed_info(store: RunStore, tmp_path: Path) -> None:
    """Two workers' traces with no distributedInfo: the ranks come from `worker0` / `worker1`."""
    paths = write_rank_traces(tmp_path / "t", RankPlan(world=2, steps=1, units=1))
    renamed = []
    for r, p in enumerate(paths):
        doc = json.loads(p.read_text())
        del doc["distributedInfo"]
        out = tmp_path / f"worker{r}.1700000000000.pt.trace.json"
        out.write_text(json.dumps(doc))
        renamed.append(out)
    tracks = _tracks(store, renamed[::-1])  # given in reverse: tracks still in rank order
    rows = tracks.to_pylist()
    assert sorted({r["rank"] for r in rows}) == [0, 1]
    assert all(r["label"].startswith(f"rank {r['rank']} · ") for r in rows)
    for lane in ("framework", "hardware"):
        lane_ranks = [r["rank"] for r in sorted(rows, key=lambda r: r["sort_key"]) if r["lane"] == lane]
        assert lane_ranks == sorted(lane_ranks) and lane_ranks
    assert {r["instance"] for r in rows} == {"rank 0", "rank 1"}


def test_distributed_info_wins_over_the_file_name(store: RunStore, tmp_path: Path) -> None:
    paths = write_rank_traces(tmp_path / "t", RankPlan(world=2, steps=1, units=1))
    swapped = [shutil.copy(paths[0], tmp_path / "rank-7.json"), shutil.copy(paths[1], tmp_path / "rank-9.json")]
    tracks = _tracks(store, [Path(p) for p in swapped])
    assert sorted(set(track_ranks(tracks).tolist())) == [0, 1]


def test_single_file_keeps_its_labels_and_gets_its_rank(store: RunStore, tmp_path: Path) -> None:
    paths = write_rank_traces(tmp_path / "t", RankPlan(world=4, steps=1, units=1))
    rows = _tracks(store, [paths[3]]).to_pylist()
    assert {r["rank"] for r in rows} == {3}
    assert not any(r["label"].startswith("rank ") for r in rows)  # one rank: nothing to tell apart


def test_neuron_capture_folders(store: RunStore) -> None:
    """Each `<instance>_pid_<pid>` folder is one rank (its framework trace's) on host `<instance>`."""
    rows = _tracks(store, [NEURON]).to_pylist()
    by_process = {(r["process"], r["rank"], r["host"]) for r in rows if r["lane"] == "hardware"}
    assert by_process == {("PID 1001 rank 0", 0, "i-0123456789abcdef0"), ("PID 1002 rank 1", 1, "i-0123456789abcdef0")}
    assert all(r["label"].startswith(f"rank {r['rank']} · ") for r in rows)


def test_old_runs_without_the_rank_column(store: RunStore, tmp_path: Path) -> None:
    """A run stored before the column: the tracks API reads the rank from the instance label."""
    paths = write_rank_traces(tmp_path / "t", RankPlan(world=2, steps=1, units=1))
    rec = ingest_paths(store, paths)
    path = store.table_path(rec.id, "tracks")
    old = store.table(rec.id, "tracks").drop_columns(["rank", "host"])
    pq.write_table(old, path)
    fresh = RunStore(store.data_dir)
    rows = build_tracks(Run.of(fresh, rec.id))["tracks"]
    assert {(r["instance"], r["rank"]) for r in rows} == {("rank 0", 0), ("rank 1", 1)}


@pytest.mark.shared
def test_real_sampled_ranks(store: RunStore, shared_traces: Path) -> None:
    """HTA's sampled rank 0 and rank 1 (nccl, world 128) as one run: ranks [0, 1], every label names its rank."""
    base = shared_traces / HTA
    tracks = _tracks(store, [base / "timeline_analysis/sampled_rank-0.json.gz",
                             base / "trace_filter/sampled_rank-1.json.gz"])
    rows = tracks.to_pylist()
    assert sorted({r["rank"] for r in rows}) == [0, 1]
    assert {r["label"].split(" · ")[0] for r in rows} == {"rank 0", "rank 1"}
    assert {(r["rank"], r["device"]) for r in rows if r["lane"] == "hardware"} == {(0, "GPU 0"), (1, "GPU 1")}


@pytest.mark.shared
@pytest.mark.parametrize(("path", "rank"), [
    ("df_index_resolver/df_index_resolver.json.gz", 1),
    ("nccl_parser_config/nccl_data.json.gz", 0),
    ("cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", 34),
    ("rank_unavailable/rank_not_found.json.gz", NO_RANK),  # distributedInfo without a rank, no rank in the name
])
def test_real_single_rank_files(store: RunStore, shared_traces: Path, path: str, rank: int) -> None:
    src = shared_traces / HTA / path
    assert {int(r) for r in track_ranks(_tracks(store, [src])).tolist()} == {rank}


def test_host_name_from_the_trace_is_escaped_on_the_ranks_page(tmp_path: Path) -> None:
    """Recent Kineto writes the machine as `host_name`: it becomes the host, and a hostile one stays text."""
    from fastapi.testclient import TestClient

    from api.app import create_app
    from explorer.config import Settings

    hostile = "<script>alert(1)</script>"
    paths = write_rank_traces(tmp_path / "t", RankPlan(world=2, steps=1, units=1))
    for p in paths:
        doc = json.loads(p.read_text())
        doc["host_name"] = hostile
        p.write_text(json.dumps(doc))
    store = RunStore(tmp_path / "data")
    rec = ingest_paths(store, paths)
    assert {(r["rank"], r["host"]) for r in store.table(rec.id, "tracks").to_pylist()} == {(0, hostile), (1, hostile)}
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as client:
        page = client.get(f"/runs/{rec.id}/ranks")
    assert page.status_code == 200 and hostile not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def test_neuron_worker_gid_names_the_rank_when_nothing_else_does(store: RunStore, tmp_path: Path) -> None:
    """Two Neuron system exports with neither distributedInfo nor a rank in their names: each one's events
    carry their worker's `worker_gid`, which is its rank."""
    export = json.loads((NEURON.parent / "formats" / "neuron_export.json").read_text())
    paths = []
    for gid in (0, 1):
        doc = {**export, "trace_event": [{**e, "worker_gid": gid} for e in export["trace_event"]]}
        path = tmp_path / f"system_{'ab'[gid]}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    rows = _tracks(store, paths).to_pylist()
    assert {r["rank"] for r in rows} == {0, 1}
    assert all(r["label"].startswith(f"rank {r['rank']} · ") for r in rows)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    doc = {**export, "trace_event": [{**e, "worker_gid": i % 2} for i, e in enumerate(export["trace_event"])]}
    (mixed / "system.json").write_text(json.dumps(doc))
    assert {r["rank"] for r in _tracks(store, [mixed / "system.json"]).to_pylist()} == {-1}  # two workers: no one rank
