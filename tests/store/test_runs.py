"""The run store: a run appears only complete; a failing write leaves nothing; recovery after a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

TRACE = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}


def write_trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TRACE))
    return path


def test_failed_write_leaves_no_run_and_no_temp_files(store: RunStore, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = pq.write_table

    def flaky(table: object, where: object, **kw: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full")
        real(table, where, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(pq, "write_table", flaky)
    with pytest.raises(OSError, match="disk full"):
        ingest_paths(store, [write_trace(tmp_path)])
    assert store.catalog.list()[0] == []
    assert list(store.runs_dir.iterdir()) == [] and list(store.tmp_dir.iterdir()) == []


def test_recover_marks_interrupted_runs_failed_and_sweeps_temp(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    rec = store.catalog.create("half", status="ingesting")
    (store.tmp_dir / rec.id / "slices.parquet").parent.mkdir(parents=True)
    (store.tmp_dir / rec.id / "slices.parquet").write_bytes(b"partial")

    restarted = RunStore(tmp_path / "data")
    assert restarted.recover() == 1
    after = restarted.get(rec.id)
    assert after.status == "failed" and "interrupted" in after.message
    assert list(restarted.tmp_dir.iterdir()) == []


def test_ready_run_has_every_table_and_delete_removes_all(store: RunStore, tmp_path: Path) -> None:
    rec = ingest_paths(store, [write_trace(tmp_path)], "one")
    folder = store.run_dir(rec.id)
    assert {p.name for p in folder.glob("*.parquet")} == {
        "tracks.parquet", "slices.parquet", "flows.parquet", "counters.parquet", "instants.parquet",
        "op_stats.parquet", "op_stats_by_shape.parquet"}
    assert [a.name for a in rec.summary.artifacts] == ["t.json"]
    assert (folder / "artifacts").is_dir() and (folder / "run.json").is_file()
    store.delete(rec.id)
    assert not folder.exists() and store.catalog.list()[0] == []


def test_the_table_cache_keeps_the_most_recent_runs(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data", cache_runs=2)
    runs = [ingest_paths(store, [write_trace(tmp_path)], f"run {i}").id for i in range(3)]
    first = {run: store.table(run, "slices") for run in runs}  # the third drops the first
    assert store.table(runs[1], "slices") is first[runs[1]] and store.table(runs[2], "slices") is first[runs[2]]
    again = store.table(runs[0], "slices")  # read again (and now the second is the least recent)
    assert again is not first[runs[0]] and again.equals(first[runs[0]])
    assert store.table(runs[2], "slices") is first[runs[2]]
    assert store.table(runs[1], "slices") is not first[runs[1]]
