"""Run storage: the same contract on a folder and on S3 (a real moto server), and runs stored on each —
published whole, read by a replica that never saw them, swept when unreferenced, deleted with their run.

The expected numbers come from the fixture trace's own JSON (tests/fixtures/kineto_recursive_frames.json),
read here independently of the ingest.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from api.cli import main as serve_main
from explorer.config import Settings
from explorer.errors import RunNotFound, StorageUnavailable
from explorer.runs import run as run_module
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import timeline_index
from explorer.store.catalog.db import sqlite_url
from explorer.store.fleet_queries import load_fleet_series
from explorer.store.index_files import INDEX_DIR
from explorer.store.runs import RunStore
from explorer.store.storage import FolderStorage, S3Storage, Storage, open_storage
from tests.helpers.catalog_backends import catalog_url as make_catalog_url
from tests.helpers.s3_server import REGION, new_bucket, s3_options
from tests.helpers.support import cli

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "kineto_recursive_frames.json"
TABLES = ["tracks", "slices", "flows", "counters", "instants", "op_stats", "op_stats_by_shape"]
KINDS = ("folder", "s3")


def kernel_truth(name: str) -> tuple[int, int]:
    """Count and summed duration (ns, from the decimal µs text) of the trace's kernels called `name`."""
    events = json.loads(TRACE.read_text(), parse_float=Decimal)["traceEvents"]
    durs = [Decimal(e["dur"]) * 1000 for e in events if e.get("cat") == "kernel" and e["name"] == name]
    return len(durs), int(sum(durs))


def make_storage(kind: str, tmp_path: Path, s3_endpoint: str) -> Storage:
    if kind == "folder":
        return open_storage((tmp_path / "shared-folder").as_uri(), tmp_path / "unused")
    return S3Storage(f"s3://{new_bucket(s3_endpoint)}/explorer", s3_endpoint, REGION, s3_options())


@pytest.fixture(params=KINDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    endpoint = request.getfixturevalue("s3_endpoint") if request.param == "s3" else ""
    return make_storage(request.param, tmp_path, endpoint)


@pytest.fixture
def s3(tmp_path: Path, s3_endpoint: str) -> Storage:
    return make_storage("s3", tmp_path, s3_endpoint)


def stores(tmp_path: Path, storage: Storage, catalog_url: str = "") -> tuple[RunStore, RunStore]:
    """Two processes' stores on one catalog and one storage, each with its own empty local folder."""
    url = catalog_url or sqlite_url(tmp_path / "catalog.sqlite")
    return (RunStore(tmp_path / "replica-a", catalog_url=url, storage=storage),
            RunStore(tmp_path / "replica-b", catalog_url=url, storage=storage))


def tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.bin").write_bytes(bytes(range(256)) * 64)
    (src / "sub" / "b.txt").write_text("b")
    (src / "sub" / "deeper" / "c.txt").write_text("c")
    (src / "artifacts").mkdir()
    (src / "artifacts" / "big.json").write_text("{}")
    return src


# ---- the contract, on both kinds --------------------------------------------------------------------------


def test_trees_round_trip_list_and_delete(storage: Storage, tmp_path: Path) -> None:
    src = tree(tmp_path)
    storage.put_tree(src, "uploads/u1")
    assert storage.exists("uploads/u1") and storage.exists("uploads/u1/a.bin")
    assert not storage.exists("uploads/u2")
    assert storage.list("uploads") == ["u1"]
    assert storage.list("uploads/u1") == ["a.bin", "artifacts", "sub"]
    assert storage.list_files("uploads/u1") == ["a.bin", "artifacts/big.json", "sub/b.txt", "sub/deeper/c.txt"]
    assert storage.list("nothing/here") == [] and storage.list_files("nothing/here") == []

    back = tmp_path / "back"
    storage.get_tree("uploads/u1", back, exclude=("artifacts",))
    assert sorted(p.relative_to(back).as_posix() for p in back.rglob("*") if p.is_file()) == [
        "a.bin", "sub/b.txt", "sub/deeper/c.txt"]
    assert (back / "a.bin").read_bytes() == (src / "a.bin").read_bytes()

    storage.put_file(src / "sub" / "b.txt", "uploads/one.txt")
    storage.get_file("uploads/one.txt", tmp_path / "one" / "x.txt")
    assert (tmp_path / "one" / "x.txt").read_text() == "b"

    storage.delete("uploads/u1")
    storage.delete("uploads/one.txt")
    storage.delete("uploads/never-there")
    assert not storage.exists("uploads/u1") and storage.list_files("uploads") == []


def test_publish_moves_a_finished_folder(storage: Storage, tmp_path: Path) -> None:
    staging = storage.staging_dir(tmp_path / "local-tmp") / "r1"
    staging.parent.mkdir(parents=True, exist_ok=True)
    src = tree(tmp_path)
    src.rename(staging)
    storage.publish(staging, "runs/r1/a1")
    assert not staging.exists()
    assert storage.list_files("runs/r1/a1") == ["a.bin", "artifacts/big.json", "sub/b.txt", "sub/deeper/c.txt"]


@pytest.mark.parametrize("key", ["../outside", "/abs", "a/../../b", ""])
def test_keys_stay_under_the_root(storage: Storage, key: str) -> None:
    with pytest.raises(ValueError, match="not a relative path"):
        storage.delete(key)


@pytest.mark.parametrize(("url", "kind"), [("", FolderStorage), ("file:///mnt/fsx/explorer", FolderStorage),
                                           ("/srv/runs", FolderStorage), ("s3://bucket/prefix", S3Storage)])
def test_storage_urls(url: str, kind: type[Storage], tmp_path: Path) -> None:
    found = open_storage(url, tmp_path, endpoint_url="http://127.0.0.1:1", region=REGION)
    assert isinstance(found, kind)
    if url.startswith("file://"):
        assert found.local_path("runs") == Path("/mnt/fsx/explorer/runs")
    if not url:
        assert found.local_path("runs") == tmp_path / "runs"  # the data folder's own layout


@pytest.mark.parametrize(("url", "message"), [("gs://b/p", "scheme 'gs' is not supported"),
                                              ("s3:///p", "names no bucket"), ("file://host/p", "not a host")])
def test_bad_storage_urls(url: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(StorageUnavailable, match=message):
        open_storage(url, tmp_path)


def test_settings_name_the_storage_and_the_aws_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPLORER_STORAGE", "s3://bucket/p")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://generic:1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://s3-only:2")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    settings = Settings()
    assert (settings.storage, settings.s3_endpoint_url, settings.s3_region) == (
        "s3://bucket/p", "http://s3-only:2", "eu-west-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    assert Settings().s3_endpoint_url == "http://generic:1"


# ---- runs on storage ----------------------------------------------------------------------------------


def test_a_replica_that_never_saw_the_run_serves_the_same_tables(storage: Storage, tmp_path: Path) -> None:
    ingester, replica = stores(tmp_path, storage)
    rec = ingest_paths(ingester, [TRACE], "frames")
    assert rec.status == "ready"
    if storage.attempts:  # object storage: published under one attempt, which the catalog names
        assert rec.location.startswith(f"runs/{rec.id}/a") and storage.list(f"runs/{rec.id}") == [rec.location.split("/")[-1]]
    else:  # a folder: where data folders always kept runs, nothing under the local data folder
        assert rec.location == f"runs/{rec.id}" and storage.exists(f"runs/{rec.id}/run.json")
        assert not (tmp_path / "replica-a" / "runs" / rec.id).exists()
    assert storage.exists(f"{rec.location}/artifacts")

    for name in TABLES:
        assert replica.table(rec.id, name).equals(ingester.table(rec.id, name)), name
        assert pq.read_table(replica.table_path(rec.id, name)).equals(pq.read_table(ingester.table_path(rec.id, name)))
    assert replica.run_json(rec.id) == ingester.run_json(rec.id)
    ids = list(range(replica.table(rec.id, "slices").num_rows))
    assert replica.slice_rows(rec.id, ids) == ingester.slice_rows(rec.id, ids)
    assert replica.get(rec.id).summary == rec.summary
    if storage.attempts:  # the replica's cache holds the tables, not the artifacts
        assert not (replica.run_dir(rec.id) / "artifacts").exists()
        fetched = tmp_path / "fetched"
        replica.fetch_run(rec.id, fetched)
        assert (fetched / "artifacts").is_dir()


def test_where_a_runs_index_files_go_on_each_storage(storage: Storage, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An index written by the ingest (EXPLORER_INDEX_FILES=ingest) travels with the run: a replica that never saw
    it maps it from its folder or its copy. A first build's files go into the run's own folder, which every replica
    of a shared folder then maps; on S3 a replica's folder is a copy of the run, and nothing is added to it (the
    index is built in memory, as before)."""
    monkeypatch.setattr(run_module, "FILES_FROM_SLICES", 1)
    ingester, replica = stores(tmp_path, storage)
    ingester.index_files = "ingest"
    rec = ingest_paths(ingester, [TRACE], "indexed")
    mapped = timeline_index(replica, rec.id, rec.summary.start_ns)
    assert isinstance(mapped.ts, np.memmap) and len(mapped.slice_id) == rec.summary.slices
    ingester.index_files = "first_build"
    plain = ingest_paths(ingester, [TRACE], "not indexed")
    first = timeline_index(replica, plain.id, plain.summary.start_ns)
    if storage.attempts:  # S3: the replica's copy is left as fetched
        assert not isinstance(first.ts, np.memmap) and not (replica.run_dir(plain.id) / INDEX_DIR).exists()
    else:  # one shared folder: the other replica maps what the first build wrote
        assert isinstance(timeline_index(ingester, plain.id, plain.summary.start_ns).ts, np.memmap)
    assert np.array_equal(first.ts, mapped.ts) and first.names == mapped.names


def test_the_fleet_query_reads_in_place(storage: Storage, tmp_path: Path) -> None:
    ingester, replica = stores(tmp_path, storage)
    runs = [ingest_paths(ingester, [TRACE], f"frames {i}").id for i in range(2)]
    calls, total_ns = kernel_truth("sm80_gemm_kernel")
    cells, top = load_fleet_series(replica, runs, "kernel", "sm80_gemm_kernel", timeout_s=30)
    assert {rid: (c.calls, c.total_ns) for rid, c in cells.items()} == {rid: (calls, total_ns) for rid in runs}
    assert top[0] == ("sm80_gemm_kernel", 2 * total_ns)
    op_cells, _ = load_fleet_series(replica, runs, "op", "aten::mm", timeout_s=30)
    assert {c.calls for c in op_cells.values()} == {1}
    if storage.attempts:  # read from S3, not from a copy: the replica fetched nothing
        assert list((tmp_path / "replica-b" / "cache" / "runs").iterdir()) == []


def test_delete_removes_the_runs_files(storage: Storage, tmp_path: Path) -> None:
    ingester, replica = stores(tmp_path, storage)
    rec = ingest_paths(ingester, [TRACE], "frames")
    replica.table(rec.id, "slices")  # the replica has it cached
    ingester.delete(rec.id)
    assert storage.list("runs") == []
    with pytest.raises(RunNotFound):
        replica.run_json(rec.id)
    with pytest.raises(RunNotFound):
        replica.get(rec.id)


class Boom(ConnectionResetError):
    """A network failure, as s3fs raises them (an OSError)."""


def test_an_interrupted_publish_leaves_no_run_and_no_objects(s3: Storage, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Uploads fail halfway: the run is failed, not ready, and its objects are gone (removed at once, or by
    the sweep when even the clean-up could not run, as for a process killed mid-upload)."""
    store, _ = stores(tmp_path, s3)
    real_put = s3.fs.put_file
    uploads = {"n": 0}

    def flaky_put(*args: object, **kwargs: object) -> None:
        uploads["n"] += 1
        if uploads["n"] == 4:
            raise Boom("connection reset")
        real_put(*args, **kwargs)

    monkeypatch.setattr(s3.fs, "put_file", flaky_put)
    with pytest.raises(Boom):
        ingest_paths(store, [TRACE], "cut", keep_failed=True)
    failed = store.catalog.list()[0][0]
    assert failed.status == "failed" and failed.location == ""
    assert s3.list_files(f"runs/{failed.id}") == []

    uploads["n"] = 0
    monkeypatch.setattr(s3, "delete", lambda key: None)  # the clean-up cannot run either
    with pytest.raises(Boom):
        ingest_paths(store, [TRACE], "cut again", keep_failed=True)
    monkeypatch.undo()
    left = next(r for r in store.catalog.list()[0] if r.name == "cut again")
    assert left.status == "failed" and len(s3.list_files(f"runs/{left.id}")) == 3

    restarted = RunStore(tmp_path / "replica-c", catalog_url=sqlite_url(tmp_path / "catalog.sqlite"), storage=s3)
    restarted.recover()
    assert s3.list("runs") == []


def test_a_killed_ingest_is_failed_and_swept_at_start_up(s3: Storage, tmp_path: Path) -> None:
    store, _ = stores(tmp_path, s3)
    rec = store.catalog.create("killed", status="ingesting")  # no lease: its process is gone
    s3.put_tree(tree(tmp_path), f"runs/{rec.id}/a0dead")
    orphan = "r" + "0" * 12  # files of a run whose record was deleted
    s3.put_tree(tmp_path / "src" / "sub", f"runs/{orphan}/a0orphan")

    assert RunStore(tmp_path / "replica-c", catalog_url=sqlite_url(tmp_path / "catalog.sqlite"),
                    storage=s3).recover() == 1
    assert store.get(rec.id).status == "failed"
    assert s3.list("runs") == []


def test_gc_keeps_the_published_attempt_only(s3: Storage, tmp_path: Path) -> None:
    store, replica = stores(tmp_path, s3)
    rec = ingest_paths(store, [TRACE], "frames")
    live = store.catalog.create("being ingested", status="ingesting")
    store.catalog.take_lease(live.id)
    s3.put_tree(tree(tmp_path), f"runs/{rec.id}/a0stale")  # a publication that lost its race
    s3.put_tree(tmp_path / "src" / "sub", f"runs/{live.id}/a0live")

    assert store.recover() == 0 and s3.exists(f"runs/{rec.id}/a0stale")  # start-up leaves ready runs' keys
    assert store.sweep() == [f"runs/{rec.id}/a0stale"]
    assert s3.list(f"runs/{rec.id}") == [rec.location.split("/")[-1]] and s3.exists(f"runs/{live.id}/a0live")
    assert replica.table(rec.id, "slices").num_rows == rec.summary.slices


def test_replicas_on_postgresql_and_s3(s3: Storage, tmp_path: Path) -> None:
    with make_catalog_url("postgresql", tmp_path) as url:
        ingester, replica = stores(tmp_path, s3, url)
        try:
            rec = ingest_paths(ingester, [TRACE], "frames")
            assert replica.get(rec.id).location == rec.location
            for name in TABLES:
                assert replica.table(rec.id, name).equals(ingester.table(rec.id, name)), name
            assert replica.run_json(rec.id) == ingester.run_json(rec.id)
            ingester.delete(rec.id)
            assert s3.list("runs") == []
        finally:
            ingester.catalog.close()
            replica.catalog.close()


@pytest.fixture
def folder_store(tmp_path: Path) -> Iterator[RunStore]:
    store = RunStore(tmp_path / "data")
    yield store
    store.catalog.close()


def test_the_default_storage_is_the_data_folder(folder_store: RunStore) -> None:
    rec = ingest_paths(folder_store, [TRACE], "frames")
    assert folder_store.run_dir(rec.id) == folder_store.data_dir / "runs" / rec.id
    assert (folder_store.data_dir / "runs" / rec.id / "run.json").is_file()
    assert folder_store.sweep() == []


def test_start_up_drops_cached_copies_of_deleted_runs(s3: Storage, tmp_path: Path) -> None:
    ingester, replica = stores(tmp_path, s3)
    kept, gone = (ingest_paths(ingester, [TRACE], name) for name in ("kept", "gone"))
    cached = {rid: replica.run_dir(rid) for rid in (kept.id, gone.id)}
    ingester.delete(gone.id)
    replica.recover()
    assert cached[kept.id].is_dir() and not (replica.cache_dir / "runs" / gone.id).exists()


def test_gc_command_sweeps_the_storage_it_is_given(tmp_path: Path) -> None:
    """`trace-explorer gc --storage file://...` (a real process): the --storage option reaches the store."""
    folder = tmp_path / "mounted"
    (folder / "runs" / "r000000000000").mkdir(parents=True)
    (folder / "runs" / "r000000000000" / "run.json").write_text("{}")
    proc = subprocess.run(cli("gc", "--data-dir", str(tmp_path / "data"), "--storage", folder.as_uri()),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "removed runs/r000000000000" in proc.stdout and list((folder / "runs").iterdir()) == []


def test_storage_that_does_not_answer_is_one_clear_error(tmp_path: Path, s3_endpoint: str) -> None:
    """A replica whose S3 endpoint is wrong: the run exists in the catalog, its files cannot be fetched."""
    storage = make_storage("s3", tmp_path, s3_endpoint)
    ingester, _ = stores(tmp_path, storage)
    rec = ingest_paths(ingester, [TRACE], "frames")
    bucket_url = storage.url
    lost = S3Storage(bucket_url, "http://127.0.0.1:1", REGION, {**s3_options(), "config_kwargs": {
        "connect_timeout": 1, "retries": {"max_attempts": 1}}})
    replica = RunStore(tmp_path / "lost", catalog_url=sqlite_url(tmp_path / "catalog.sqlite"), storage=lost)
    with pytest.raises(StorageUnavailable, match=rf"the run storage {bucket_url} is not answering \(fetching run "):
        replica.table(rec.id, "slices")
    with pytest.raises(StorageUnavailable, match=r"not answering \(sweeping unreferenced runs\)"):
        replica.recover()


def test_serve_takes_storage_and_names_a_bad_one_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(serve_main, ["serve", "--data-dir", str(tmp_path), "--storage", "gs://bucket/p"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "storage URL scheme 'gs' is not supported" in result.output


def test_local_copies_of_s3_runs_are_bounded_least_recently_read_first(s3: Storage, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica keeps copies of the runs it read up to cache_disk_mb: past it, the least recently read copy
    goes (never one read within KEEP_S), and a dropped run is fetched again, the same, when read again."""
    writer, replica = stores(tmp_path, s3)
    ids = [ingest_paths(writer, [TRACE], f"run {i}").id for i in range(3)]
    replica.table(ids[0], "slices")
    one = sum(f.stat().st_size for f in replica.run_dir(ids[0]).rglob("*") if f.is_file())
    replica.copies.max_bytes = 2 * one + one // 2  # room for two copies
    monkeypatch.setattr("explorer.store.run_copies.KEEP_S", 0.0)
    want = replica.table(ids[0], "slices")
    for rid in ids[1:]:
        replica.run_json(rid)
    copies = {p.parent.parent.name for p in (replica.cache_dir / "runs").glob("*/*/run.json")}
    assert copies == {ids[1], ids[2]}  # the first, read least recently, went
    replica._cache.forget(ids[0])  # the in-memory tables too: the next read goes to disk
    assert replica.table(ids[0], "slices").equals(want)  # fetched again
    assert {p.parent.parent.name for p in (replica.cache_dir / "runs").glob("*/*/run.json")} == {ids[0], ids[2]}

    monkeypatch.setattr("explorer.store.run_copies.KEEP_S", 3600.0)  # everything read just now stays
    replica.copies.max_bytes = 1
    assert replica.copies.trim() == []
