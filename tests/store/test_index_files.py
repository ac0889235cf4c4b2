"""The timeline index the ingest stores in a run's folder (explorer/store/index_files.py), against the index a
server builds from the run's stored tables: every array, list and mapping equal, the windows equal, the arrays
mapped rather than read, and anything but a complete index of this version and origin read as none."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from explorer.analysis.timeline.index import TimelineIndex, build_timeline_index, compute_window
from explorer.errors import DiskFull
from explorer.model.split import SPLIT_KEY
from explorer.runs import run as run_module
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import timeline_index
from explorer.store import index_files as lod_files
from explorer.store import runs as runs_module
from explorer.store.budget import nbytes_of
from explorer.store.index_files import INDEX_DIR, load_timeline_index, save_timeline_index
from explorer.store.runs import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from synth import write_kineto_trace  # noqa: E402

REAL = ("HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz",
        "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")


def built(store: RunStore, run_id: str) -> TimelineIndex:
    """The index as a server built it before indexes were stored: from the tables read back."""
    t = store.table
    return build_timeline_index(t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "counters"), t(run_id, "flows"),
                                store.get(run_id).summary.start_ns, t(run_id, "instants"))


def assert_same(a: Any, b: Any, where: str = "index") -> None:
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype, where
        assert np.array_equal(a, b), where
    elif is_dataclass(a):
        assert type(a) is type(b), where
        for f in fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, list) and a and not isinstance(a[0], str):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def windows(ix: TimelineIndex, span: int) -> list[dict[str, Any]]:
    return [compute_window(ix, a, b, 1500) for a, b in ((0, span), (span // 3, span // 3 + span // 50),
                                                         (span // 2, span // 2 + span // 5000 + 1))]


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunStore, str]:
    tmp = tmp_path_factory.mktemp("lod_files")
    write_kineto_trace(tmp / "trace.json", 60_000)
    store = RunStore(tmp / "data")
    store.index_files = "ingest"
    return store, ingest_paths(store, [tmp / "trace.json"]).id


def test_the_ingest_stores_the_index_a_server_would_build(synthetic_run: tuple[RunStore, str]) -> None:
    store, run_id = synthetic_run
    rec = store.get(run_id)
    stored = load_timeline_index(store.run_dir(run_id) / INDEX_DIR, rec.summary.start_ns)
    assert stored is not None
    fresh = built(store, run_id)
    assert len(fresh.levels) >= 3 and len(fresh.slice_id) == rec.summary.slices  # a run with levels to compare
    assert_same(fresh, stored)
    assert windows(fresh, rec.summary.span_ns) == windows(stored, rec.summary.span_ns)
    assert fresh.names == sorted(fresh.names)  # one encoding of the names, whatever the column's was
    assert store.run_json(run_id)["meta"][SPLIT_KEY]["index"] > 0  # the ingest's time split names the step


def test_the_store_maps_the_stored_index_and_builds_one_where_none_is(synthetic_run: tuple[RunStore, str]) -> None:
    store, run_id = synthetic_run
    origin = store.get(run_id).summary.start_ns
    ix = timeline_index(store, run_id, origin)
    assert isinstance(ix.ts, np.memmap) and isinstance(ix.levels[0].bins.end, np.memmap)
    assert not ix.ts.flags.writeable
    # mapped pages are the page cache's: the server's memory budget does not count them
    assert nbytes_of(ix) < nbytes_of(built(store, run_id)) // 20
    # a run stored before indexes were: built from its tables, the same
    folder = store.run_dir(run_id) / INDEX_DIR
    kept = folder.with_name("index-kept")
    folder.rename(kept)
    try:
        rebuilt = timeline_index(store, run_id, origin)
        assert not isinstance(rebuilt.ts, np.memmap)
        assert_same(rebuilt, ix)
    finally:
        kept.rename(folder)


def test_an_incomplete_or_other_index_reads_as_none(synthetic_run: tuple[RunStore, str], tmp_path: Path) -> None:
    store, run_id = synthetic_run
    origin = store.get(run_id).summary.start_ns
    copy = tmp_path / INDEX_DIR
    shutil.copytree(store.run_dir(run_id) / INDEX_DIR, copy)
    assert load_timeline_index(copy, origin) is not None
    assert load_timeline_index(copy, origin + 1) is None  # another origin: its times would be shifted
    meta = json.loads((copy / "index.json").read_text())
    (copy / "index.json").write_text(json.dumps({**meta, "version": meta["version"] + 1}))
    assert load_timeline_index(copy, origin) is None
    (copy / "index.json").write_text(json.dumps(meta))
    assert load_timeline_index(copy, origin) is not None
    (copy / "slice_id.npy").rename(copy / "moved.npy")  # a part missing
    assert load_timeline_index(copy, origin) is None
    (copy / "moved.npy").rename(copy / "slice_id.npy")
    (copy / "ts.npy").write_bytes(b"\x93NUMPY damaged")  # a part damaged
    assert load_timeline_index(copy, origin) is None
    (copy / "index.json").write_text(json.dumps({**meta, "levels": "x"}))  # damaged metadata
    assert load_timeline_index(copy, origin) is None
    (copy / "index.json").write_text("{not json")
    assert load_timeline_index(copy, origin) is None
    (copy / "index.json").unlink()  # an interrupted write: the metadata is written last
    assert load_timeline_index(copy, origin) is None
    assert load_timeline_index(tmp_path / "nothing", origin) is None


def test_written_part_by_part_the_build_holds_a_fraction_of_the_index(synthetic_run: tuple[RunStore, str],
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The ingest's build hands each part to a file as it is made: on one thread, what it holds at most is well
    under what a build kept in memory holds at the end (the whole index), measured by Python's allocation tracer.
    (Its levels are built in pieces of 8,192 positions, as a run of millions of slices is. On two threads, the
    ingest's, two parts are made at once: about the index's size, depending on the threads' timing.)"""
    monkeypatch.setattr(lod_files, "FILE_PIECE", 1 << 13)
    monkeypatch.setattr(lod_files, "FILE_THREADS", 1)
    store, run_id = synthetic_run
    t = store.table
    tables = (t(run_id, "slices"), t(run_id, "tracks"), t(run_id, "counters"), t(run_id, "flows"))
    origin, instants = store.get(run_id).summary.start_ns, t(run_id, "instants")
    kept = nbytes_of(built(store, run_id))
    tracemalloc.start()
    try:
        save_timeline_index(tmp_path / "ix", *tables, origin, instants)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.75 * kept, (peak, kept)
    assert_same(load_timeline_index(tmp_path / "ix", origin), built(store, run_id))


def test_a_failed_write_stops_the_index_build_and_leaves_no_run(store: RunStore, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The index waits for the slices' Parquet; a write that fails first must not leave it waiting (the ingest
    would hang) nor let it build."""
    store.index_files = "ingest"
    write_kineto_trace(tmp_path / "trace.json", 2_000)
    real_write = runs_module._write_table
    builds: list[str] = []
    monkeypatch.setattr(lod_files, "build_index_into", lambda *a, **k: builds.append("built"))

    def failing(work: Path, name: str, *args: Any) -> None:
        if name == "slices":
            raise OSError(28, "No space left on device")
        real_write(work, name, *args)

    monkeypatch.setattr(runs_module, "_write_table", failing)
    done: list[BaseException] = []

    def ingest() -> None:
        try:
            ingest_paths(store, [tmp_path / "trace.json"])
        except BaseException as exc:
            done.append(exc)

    worker = threading.Thread(target=ingest, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the ingest hung on its index"
    # a full disk is the typed error that names the folder (explorer.errors.DiskFull), nothing of the run kept
    assert isinstance(done[0], DiskFull) and "no space left in" in done[0].message
    assert builds == []
    assert store.catalog.list()[0] == [] and not any(store.staging_dir.iterdir())


@pytest.mark.parametrize("name", REAL)
def test_real_traces_store_the_index_a_server_would_build(shared_traces: Path, store: RunStore, name: str) -> None:
    store.index_files = "ingest"
    rec = ingest_paths(store, [shared_traces / name])
    stored = timeline_index(store, rec.id, rec.summary.start_ns)
    assert isinstance(stored.ts, np.memmap)
    fresh = built(store, rec.id)
    assert_same(fresh, stored)
    assert windows(fresh, rec.summary.span_ns) == windows(stored, rec.summary.span_ns)


def test_the_setting_decides_where_the_index_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default (EXPLORER_INDEX_FILES unset) a run is stored without an index and its first build writes it into
    the run's folder; =ingest stores the same index with the run; =off never writes one (built in memory)."""
    from explorer.config import Settings

    monkeypatch.setattr(run_module, "FILES_FROM_SLICES", 1)
    write_kineto_trace(tmp_path / "trace.json", 3_000)
    monkeypatch.delenv("EXPLORER_INDEX_FILES", raising=False)
    default = RunStore.from_settings(Settings(data_dir=tmp_path / "default"))
    assert default.index_files == "first_build"
    rec = ingest_paths(default, [tmp_path / "trace.json"])
    assert not (default.run_dir(rec.id) / INDEX_DIR).exists()
    assert "index" not in default.run_json(rec.id)["meta"][SPLIT_KEY]
    written = timeline_index(default, rec.id, rec.summary.start_ns)
    assert isinstance(written.ts, np.memmap) and (default.run_dir(rec.id) / INDEX_DIR / "index.json").is_file()
    monkeypatch.setenv("EXPLORER_INDEX_FILES", "off")
    off = RunStore.from_settings(Settings(data_dir=tmp_path / "off"))
    rec_off = ingest_paths(off, [tmp_path / "trace.json"])
    ix = timeline_index(off, rec_off.id, rec_off.summary.start_ns)
    assert not isinstance(ix.ts, np.memmap) and not (off.run_dir(rec_off.id) / INDEX_DIR).exists()
    monkeypatch.setenv("EXPLORER_INDEX_FILES", "ingest")
    on = RunStore.from_settings(Settings(data_dir=tmp_path / "on"))
    rec_on = ingest_paths(on, [tmp_path / "trace.json"])
    assert (on.run_dir(rec_on.id) / INDEX_DIR / "index.json").is_file()
    stored = timeline_index(on, rec_on.id, rec_on.summary.start_ns)
    assert isinstance(stored.ts, np.memmap)
    assert_same(ix, stored)
    assert_same(ix, written)


@pytest.fixture
def unindexed(synthetic_run: tuple[RunStore, str], tmp_path: Path) -> Iterator[tuple[RunStore, str, Path]]:
    """The synthetic run as a run stored without an index (its stored one moved away for the test and back)."""
    store, run_id = synthetic_run
    folder = store.run_dir(run_id) / INDEX_DIR
    kept = tmp_path / "kept-index"
    folder.rename(kept)
    store.index_files = "first_build"
    try:
        yield store, run_id, folder
    finally:
        store.index_files = "ingest"
        shutil.rmtree(folder, ignore_errors=True)
        kept.rename(folder)


def leftovers(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir() if p.name.startswith("."))


def test_a_big_runs_first_build_writes_its_index_and_later_ones_map_it(
        unindexed: tuple[RunStore, str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A run stored without an index (the default ingest) of at least FILES_FROM_SLICES slices: its first build
    writes the index into the run's folder and answers from the files; every later one (a restarted server) maps
    them without building; a smaller run's is built in memory and nothing is written."""
    store, run_id, folder = unindexed
    rec = store.get(run_id)
    monkeypatch.setattr(run_module, "FILES_FROM_SLICES", rec.summary.slices + 1)
    small = timeline_index(store, run_id, rec.summary.start_ns)
    assert not isinstance(small.ts, np.memmap) and not folder.exists()
    monkeypatch.setattr(run_module, "FILES_FROM_SLICES", rec.summary.slices)
    first = timeline_index(store, run_id, rec.summary.start_ns)
    assert isinstance(first.ts, np.memmap) and (folder / "index.json").is_file()
    assert leftovers(folder.parent) == []
    assert_same(built(store, run_id), first)
    assert windows(small, rec.summary.span_ns) == windows(first, rec.summary.span_ns)

    def no_build(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(run_module, "build_timeline_index", no_build)
    monkeypatch.setattr(run_module, "save_timeline_index", no_build)
    again = timeline_index(store, run_id, rec.summary.start_ns)
    assert isinstance(again.ts, np.memmap)
    assert_same(first, again)


def test_a_damaged_index_is_replaced_and_a_failed_write_leaves_nothing(
        unindexed: tuple[RunStore, str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """An index folder without its metadata (a write cut short by hand, or a copy) is replaced whole by the next
    build; a write that fails (a full disk) answers from memory and leaves neither an index nor a part of one."""
    store, run_id, folder = unindexed
    rec = store.get(run_id)
    monkeypatch.setattr(run_module, "FILES_FROM_SLICES", 1)
    folder.mkdir()
    (folder / "ts.npy").write_bytes(b"junk")
    ix = timeline_index(store, run_id, rec.summary.start_ns)
    assert isinstance(ix.ts, np.memmap) and (folder / "index.json").is_file()
    assert leftovers(folder.parent) == []
    assert_same(built(store, run_id), ix)
    shutil.rmtree(folder)
    real_save = run_module.save_timeline_index

    def full_disk(target: Path, *args: Any) -> None:
        real_save(target, *args)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_module, "save_timeline_index", full_disk)
    from_memory = timeline_index(store, run_id, rec.summary.start_ns)
    assert not isinstance(from_memory.ts, np.memmap)
    assert not folder.exists() and leftovers(folder.parent) == []
    assert_same(ix, from_memory)


def test_an_addition_to_a_run_needs_the_runs_own_folder(store: RunStore, tmp_path: Path) -> None:
    """RunStore.add_to_run: nothing is made for a run whose folder is gone (deleted while its index was built), and a
    killed process's half-written addition is removed by the next one once it is an hour old."""
    made: list[Path] = []
    assert store.add_to_run("gone", INDEX_DIR, lambda f: made.append(f)) is None
    assert made == [] and not (store.runs_dir / "gone").exists()
    write_kineto_trace(tmp_path / "trace.json", 500)
    run_id = ingest_paths(store, [tmp_path / "trace.json"]).id
    run_dir = store.run_dir(run_id)
    old, recent = run_dir / f".{INDEX_DIR}.killed", run_dir / f".{INDEX_DIR}.writing"
    for half in (old, recent):
        half.mkdir()
        (half / "ts.npy").write_bytes(b"part")
    os.utime(old, (time.time() - runs_module.STALE_ADDITION_S - 60,) * 2)
    added = store.add_to_run(run_id, INDEX_DIR, lambda f: (f.mkdir(), (f / "a.npy").write_bytes(b"x")))
    assert added == run_dir / INDEX_DIR and (added / "a.npy").read_bytes() == b"x"
    assert leftovers(run_dir) == [recent.name]  # (a write in progress elsewhere is left to finish)


def test_a_server_writes_a_fresh_uploads_index_and_a_restarted_one_maps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP: an upload's warm-up (the ingest worker, once the run is ready) writes the run's index into its
    folder; a server started again on the same data folder answers the same timeline windows from the mapped files,
    building nothing."""
    from fastapi.testclient import TestClient

    from api.app import create_app
    from explorer.config import Settings

    monkeypatch.setattr(run_module, "FILES_FROM_SLICES", 1)
    write_kineto_trace(tmp_path / "trace.json", 4_000)
    settings = Settings(data_dir=tmp_path / "data")
    with TestClient(create_app(settings)) as client:
        r = client.post("/api/runs", files=[("files", ("trace.json", (tmp_path / "trace.json").read_bytes()))])
        assert r.status_code in (200, 202), r.text
        run_id = r.json()["id"]
        index_json = settings.data_dir / "runs" / run_id / INDEX_DIR / "index.json"
        deadline = time.monotonic() + 60
        while not index_json.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get(f"/api/runs/{run_id}").json()["status"] == "ready"
        assert index_json.is_file(), "the warm-up wrote no index"
        first = [client.get(f"/api/runs/{run_id}/timeline", params=q).json() for q in WINDOW_QUERIES]

    def no_build(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(run_module, "build_timeline_index", no_build)
    monkeypatch.setattr(run_module, "save_timeline_index", no_build)
    with TestClient(create_app(settings)) as client:
        again = [client.get(f"/api/runs/{run_id}/timeline", params=q).json() for q in WINDOW_QUERIES]
        state = client.app.state.explorer  # type: ignore[attr-defined]
        assert isinstance(state.runs.get(run_id).timeline_index().ts, np.memmap)
    assert again == first and first[0]["tracks"]


WINDOW_QUERIES = ({"width_px": 1200}, {"start_ns": 1_000, "end_ns": 2_000_000, "width_px": 800})
