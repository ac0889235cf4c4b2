"""The log-folder watcher (explorer/runs/watch.py) on real files written the ways profilers write them: slowly,
by rename, by torch.profiler's tensorboard_trace_handler, by several ranks, as a Neuron capture folder,
broken; and across a restart. Every run is checked against counts taken from the files themselves."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.watch import LEDGER, WATCH_TAG, Watcher, is_closed, trace_label
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore
from tests.conftest import FIXTURES
from tests.helpers.support import serve_subprocess

POLL_S, SETTLE_S = 0.1, 0.4


def kineto(step: int, ops: int, rank: int | None = None, base_us: int = 1_000_000) -> dict[str, Any]:
    """A small Kineto-style trace: one ProfilerStep#step annotation around `ops` cpu_op slices."""
    events: list[dict[str, Any]] = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
                                     "tid": 1, "ts": base_us, "dur": 10 * ops + 10}]
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": base_us + 10 * i + 1,
                "dur": 5} for i in range(ops)]
    trace: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        trace["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
    return trace


def complete_events(path: Path) -> int:
    """The number of complete ("X") events in a trace file, read independently of the ingest."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return sum(1 for e in json.load(f)["traceEvents"] if e.get("ph") == "X")


def wait_for(what: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := what():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def runs(store: RunStore) -> list[RunRecord]:
    return store.catalog.list(limit=1000)[0]


def settled(store: RunStore, count: int) -> Callable[[], list[RunRecord] | None]:
    def check() -> list[RunRecord] | None:
        got = runs(store)
        return got if len(got) >= count and all(r.status in ("ready", "failed") for r in got) else None
    return check


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    return d


@pytest.fixture
def watching(store: RunStore, logdir: Path) -> Iterator[Watcher]:
    watcher = Watcher(store, [logdir], poll_s=POLL_S, settle_s=SETTLE_S, stale_s=30)
    watcher.start()
    yield watcher
    watcher.stop()


def test_a_slowly_written_trace_is_ingested_once_when_complete(store: RunStore, logdir: Path,
                                                                watching: Watcher) -> None:
    text = json.dumps(kineto(3, 200)).encode()
    path = logdir / "slow.pt.trace.json"
    # each pause falls right after an event's closing brace: the last byte alone looks finished
    cuts = [text.index(b"}", len(text) * k // 5) + 1 for k in range(1, 5)]
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    with path.open("wb") as f:
        for chunk in chunks:
            f.write(chunk)
            f.flush()
            time.sleep(4 * POLL_S)  # unchanged over several polls: only the open JSON says "not yet"
            assert runs(store) == [] or path.stat().st_size == len(text)
    (rec,) = wait_for(settled(store, 1))
    time.sleep(4 * POLL_S)
    assert [r.id for r in runs(store)] == [rec.id]
    assert rec.status == "ready", rec.message
    assert rec.summary.slices == complete_events(path) == 201
    assert rec.name == "logs/slow step 3" and rec.tags == [WATCH_TAG]


def test_a_file_moved_in_by_rename_is_ingested_at_once(store: RunStore, logdir: Path, watching: Watcher) -> None:
    sub = logdir / "exp1"
    sub.mkdir()
    hidden = sub / ".worker0.1700000000000.pt.trace.json.tmp"  # a writer's temporary name is never read
    events = kineto(7, 12)["traceEvents"]
    hidden.write_text(json.dumps(events)[:-1])  # JSON Array Format without its "]": never "closed"
    old = time.time() - 60
    os.utime(hidden, (old, old))  # written well before the scans (rsync and mv keep the mtime)
    time.sleep(5 * POLL_S)
    assert runs(store) == []
    final = sub / "worker0.1700000000000.pt.trace.json"
    os.rename(hidden, final)
    (rec,) = wait_for(settled(store, 1), timeout=10)  # well before the watcher's stale time (30 s)
    assert rec.status == "ready", rec.message
    assert rec.name == "logs/exp1/worker0 step 7"
    assert rec.summary.slices == len(events) == 13


def test_a_gzip_trace_is_ingested_when_its_stream_is_complete(store: RunStore, logdir: Path,
                                                               watching: Watcher) -> None:
    packed = gzip.compress(json.dumps(kineto(2, 9)).encode())
    path = logdir / "host_1.1700000000000.pt.trace.json.gz"
    path.write_bytes(packed[:-8])  # everything but the gzip trailer
    time.sleep(6 * POLL_S)
    assert runs(store) == []
    with path.open("ab") as f:
        f.write(packed[-8:])
    (rec,) = wait_for(settled(store, 1))
    assert rec.status == "ready" and rec.name == "logs/host_1 step 2"
    assert rec.summary.slices == complete_events(path) == 10


def test_two_ranks_of_one_step_become_one_run(store: RunStore, logdir: Path, watching: Watcher) -> None:
    for rank in (0, 1):
        (logdir / f"rank{rank}.step5.pt.trace.json").write_text(json.dumps(kineto(5, 10 + rank, rank)))
    (logdir / "rank0.step6.pt.trace.json").write_text(json.dumps(kineto(6, 4, 0)))
    got = {r.name: r for r in wait_for(settled(store, 2))}
    assert sorted(got) == ["logs step 5 (2 ranks)", "logs/rank0 step 6"]
    both = got["logs step 5 (2 ranks)"]
    assert both.status == "ready", both.message
    assert [f["name"] for f in both.summary.files] == ["rank0.step5.pt.trace.json", "rank1.step5.pt.trace.json"]
    assert both.summary.slices == sum(complete_events(logdir / f"rank{r}.step5.pt.trace.json") for r in (0, 1))
    instances = {t["instance"] for t in store.table(both.id, "tracks").to_pylist()}
    assert {"rank 0", "rank 1"} <= instances


def test_handler_files_of_two_workers_join_by_the_step_inside(store: RunStore, logdir: Path,
                                                              watching: Watcher) -> None:
    # tensorboard_trace_handler names carry no step: the ProfilerStep#N and distributedInfo inside do
    for rank, worker in enumerate(("nodeA_101", "nodeB_202")):
        (logdir / f"{worker}.17000000000{rank}0.pt.trace.json").write_text(json.dumps(kineto(12, 3 + rank, rank)))
    (rec,) = wait_for(settled(store, 1))
    assert rec.name == "logs step 12 (2 ranks)" and rec.status == "ready", rec.message
    assert [f["name"] for f in rec.summary.files] == sorted(p.name for p in logdir.iterdir())
    assert rec.summary.slices == 4 + 5


def test_a_restart_does_not_ingest_again(store: RunStore, logdir: Path) -> None:
    (logdir / "a.pt.trace.json").write_text(json.dumps(kineto(1, 3)))
    first = Watcher(store, [logdir], poll_s=POLL_S, settle_s=0)
    wait_for(lambda: [first.poll() for _ in range(3)] and runs(store))
    assert (store.data_dir / LEDGER).is_file()
    again = Watcher(RunStore(store.data_dir), [logdir], poll_s=POLL_S, settle_s=0)
    for _ in range(5):
        assert again.poll() == []
        time.sleep(POLL_S)
    # a copy under another name is the same content: the catalog's sha256 finds the existing run
    shutil.copy(logdir / "a.pt.trace.json", logdir / "copy.pt.trace.json")
    for _ in range(5):
        assert again.poll() == []
        time.sleep(POLL_S)
    assert len(runs(store)) == 1
    # a file rewritten in place is new content: a new run
    (logdir / "a.pt.trace.json").write_text(json.dumps(kineto(2, 3)))
    wait_for(lambda: again.poll() or None)
    assert len(runs(store)) == 2


def test_a_bad_file_fails_its_run_and_the_watching_goes_on(store: RunStore, logdir: Path,
                                                             watching: Watcher) -> None:
    (logdir / "bad.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "ts": "soon"}], "x": }')
    (bad,) = wait_for(settled(store, 1))
    assert bad.status == "failed" and "bad.pt.trace.json" in bad.message, bad.message
    (logdir / "good.pt.trace.json").write_text(json.dumps(kineto(2, 5)))
    got = {r.name: r for r in wait_for(settled(store, 2))}
    assert got["logs/good step 2"].status == "ready"
    assert got["logs/good step 2"].summary.slices == 6


def test_a_neuron_capture_folder_is_one_run(store: RunStore, logdir: Path, watching: Watcher) -> None:
    shutil.copytree(FIXTURES / "neuron" / "capture_two_procs", logdir / "capture")
    (rec,) = wait_for(settled(store, 1))
    assert rec.status == "ready", rec.message
    assert rec.name == "logs/capture"
    copied = sorted(p.relative_to(logdir).as_posix() for p in (logdir / "capture").rglob("*") if p.is_file())
    assert sorted(a.name for a in rec.summary.artifacts) == copied


TB_SCRIPT = r"""
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
torch.set_num_threads(1)
x = torch.randn(32, 64)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=1, repeat=3),
             on_trace_ready=tensorboard_trace_handler(sys.argv[1], worker_name="worker0")) as prof:
    for _ in range(9):
        (x * x).sum()
        prof.step()
"""


@pytest.mark.slow
def test_tensorboard_trace_handler_steps_each_become_a_run(store: RunStore, logdir: Path, watching: Watcher,
                                                           tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "tb.py"
    script.write_text(TB_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(logdir / "train")], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = sorted((logdir / "train").glob("worker0.*.pt.trace.json"))
    assert len(files) == 3
    expected = {}
    for f in files:
        with f.open() as fh:
            steps = [e["name"] for e in json.load(fh)["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
        assert len(steps) == 1
        expected[f"logs/train/worker0 step {steps[0].split('#')[1]}"] = (f.name, complete_events(f))
    got = {r.name: r for r in wait_for(settled(store, 3))}
    assert sorted(got) == sorted(expected)
    for name, (file_name, events) in expected.items():
        assert got[name].status == "ready", got[name].message
        assert [f["name"] for f in got[name].summary.files] == [file_name]
        assert got[name].summary.slices == events


def test_an_unclosed_file_left_alone_is_ingested_after_the_stale_time(store: RunStore, logdir: Path) -> None:
    events = kineto(8, 3)["traceEvents"]
    path = logdir / "array.pt.trace.json"
    path.write_text(json.dumps(events)[:-1])  # the JSON Array Format without its closing "]": legal
    watcher = Watcher(store, [logdir], poll_s=POLL_S, settle_s=0, stale_s=1.0)
    started = time.monotonic()
    watcher.start()
    try:
        (rec,) = wait_for(settled(store, 1))
    finally:
        watcher.stop()
    assert time.monotonic() - started >= 1.0
    assert rec.status == "ready" and rec.summary.slices == len(events) == 4


@pytest.mark.parametrize(("tail", "closed"), [
    (b'{"traceEvents": []}\n  ', True), (b"[{}]", True), (b'{"traceEvents": [{"ph": "X"},', False), (b"", False),
    (b'{"traceEvents": [{"ph": "X"}', False), (b'{"traceEvents": [\n{"name": "}]\\"}"}]}', True)])
def test_a_file_is_closed_when_its_json_is(tmp_path: Path, tail: bytes, closed: bool) -> None:
    plain, packed = tmp_path / "t.pt.trace.json", tmp_path / "t.pt.trace.json.gz"
    plain.write_bytes(tail)
    packed.write_bytes(gzip.compress(tail))
    assert is_closed(plain) is closed
    assert is_closed(packed) is closed
    packed.write_bytes(gzip.compress(tail)[:-6])  # the gzip trailer not yet written
    assert not is_closed(packed)


@pytest.mark.parametrize(("name", "label"), [
    ("host_12.1764590000123456789.pt.trace.json", ("host_12", None, None)),
    ("host_12.1700000000000.pt.trace.json.gz", ("host_12", None, None)),
    ("rank1.step5.pt.trace.json", ("rank1", 5, 1)),
    ("train_rank_3_step-12.pt.trace.json", ("train_rank_3", 12, 3)),
    ("model.pt.trace.json", ("model", None, None)),
])
def test_trace_names_give_worker_step_and_rank(name: str, label: tuple[str, int | None, int | None]) -> None:
    assert trace_label(Path(name)) == label


def test_a_watched_folder_holding_the_data_folder_is_not_read_back(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    (tmp_path / "one.pt.trace.json").write_text(json.dumps(kineto(1, 2)))
    watcher = Watcher(store, [tmp_path], poll_s=POLL_S, settle_s=0)
    wait_for(lambda: [watcher.poll() for _ in range(3)] and runs(store))
    for _ in range(5):  # the run's copy of the file (data/runs/<id>/artifacts/...) is not a new trace
        assert watcher.poll() == []
    assert len(runs(store)) == 1


def test_the_watcher_thread_survives_a_vanishing_folder(store: RunStore, logdir: Path) -> None:
    watcher = Watcher(store, [logdir / "not-yet"], poll_s=POLL_S, settle_s=0)
    watcher.start()
    try:
        time.sleep(3 * POLL_S)
        (logdir / "not-yet").mkdir()
        (logdir / "not-yet" / "late.pt.trace.json").write_text(json.dumps(kineto(4, 2)))
        (rec,) = wait_for(settled(store, 1))
        assert rec.status == "ready" and rec.name == "not-yet/late step 4"
        assert threading.active_count() >= 1
    finally:
        watcher.stop()


@pytest.mark.slow
def test_serve_watch_ingests_into_the_running_server(tmp_path: Path, logdir: Path) -> None:
    import httpx

    env = {"EXPLORER_WATCH_POLL_S": "0.2", "EXPLORER_WATCH_SETTLE_S": "0.3"}
    with serve_subprocess(tmp_path / "data", "--watch", str(logdir), env=env) as (base, _proc):
        (logdir / "rank0.step9.pt.trace.json").write_text(json.dumps(kineto(9, 7, 0)))

        def ready() -> list[dict[str, Any]] | None:
            got = httpx.get(f"{base}/api/runs").json()["runs"]
            return got if got and got[0]["status"] == "ready" else None

        (run,) = wait_for(ready)
    assert run["name"] == "logs/rank0 step 9" and run["tags"] == [WATCH_TAG]
    assert run["summary"]["slices"] == complete_events(logdir / "rank0.step9.pt.trace.json")


@pytest.mark.slow
def test_a_servers_watcher_ingests_in_a_process_of_its_own(tmp_path: Path, logdir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --watch` parses nothing in the server's process: each run is ingested in an ingest process, as an
    upload is (explorer.runs.apart), so the server's RSS does not grow by an ingest's. An ingest in this
    process fails the test; the child, started from a fresh forkserver, does not see that patch. A bad file
    still fails its run, with the child's message, and the watching goes on."""
    from fastapi.testclient import TestClient

    import explorer.runs.watch
    from api.app import create_app
    from explorer.config import Settings

    def in_the_server(*args: object, **kwargs: object) -> None:
        raise AssertionError("a watched trace was ingested in the server's process")

    monkeypatch.setattr(explorer.runs.watch, "run_ingest", in_the_server)
    settings = Settings(data_dir=tmp_path / "data", watch_dirs=[logdir], watch_poll_s=POLL_S,
                        watch_settle_s=SETTLE_S)
    with TestClient(create_app(settings)) as client:
        (logdir / "rank0.step4.pt.trace.json").write_text(json.dumps(kineto(4, 9, 0)))
        (logdir / "broken.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": 3}]}')

        def done() -> list[dict[str, Any]] | None:
            got = client.get("/api/runs").json()["runs"]
            return got if len(got) == 2 and all(r["status"] in ("ready", "failed") for r in got) else None

        got = {r["name"]: r for r in wait_for(done, timeout=120)}
    good, bad = got["logs/rank0 step 4"], got["logs/broken"]
    assert good["status"] == "ready" and good["summary"]["slices"] == complete_events(logdir / "rank0.step4.pt.trace.json")
    assert bad["status"] == "failed" and "broken.pt.trace.json" in bad["message"]
