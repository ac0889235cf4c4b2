"""Per-run limits (explorer/ingest/limits.py): past a count limit the ingest fails with a clear error
naming the limit and its setting, leaving no run; a long name is cut, with a warning. On the CLI (limits
from the environment) and on an upload (limits from the server's Settings) alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.errors import BadTrace
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.limits import IngestLimits
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from tests.api.conftest import wait_until_done


def trace(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def flat(n: int, threads: int = 1, name: str = "op") -> list[dict[str, object]]:
    return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": i % threads, "ts": i * 10, "dur": 5}
            for i in range(n)]


def nested(depth: int) -> list[dict[str, object]]:
    return [{"ph": "X", "cat": "cpu_op", "name": f"f{i}", "pid": 1, "tid": 1, "ts": i, "dur": 2 * (depth - i)}
            for i in range(depth)]


@pytest.mark.parametrize(("events", "limits", "words"), [
    (flat(150), IngestLimits(max_events=100), ("events: 150", "limit of 100", "EXPLORER_MAX_EVENTS")),
    (flat(600, threads=600), IngestLimits(max_tracks=500), ("tracks", "600", "limit of 500", "EXPLORER_MAX_TRACKS")),
    (nested(50), IngestLimits(max_depth=20), ("deep: 50", "limit of 20", "EXPLORER_MAX_DEPTH")),
], ids=["events", "tracks", "depth"])
def test_a_count_over_its_limit_is_a_clear_error_and_leaves_no_run(tmp_path: Path, events: list[dict[str, object]],
                                                                   limits: IngestLimits, words: tuple[str, ...]) -> None:
    store = RunStore(tmp_path / "data")
    path = trace(tmp_path / "t.json", events)
    with pytest.raises(BadTrace) as err:
        ingest_paths(store, [path], limits=limits)
    assert "t.json" in str(err.value) and all(w in str(err.value) for w in words), err.value
    assert store.catalog.list()[0] == [] and list(store.runs_dir.iterdir()) == []
    assert ingest_paths(store, [path]).status == "ready"  # the defaults are generous


def test_at_the_limit_is_fine(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    rec = ingest_paths(store, [trace(tmp_path / "t.json", nested(20))], limits=IngestLimits(max_depth=20))
    assert max(t["max_depth"] for t in store.table(rec.id, "tracks").to_pylist()) == 19


@pytest.mark.parametrize("reader", ["per event", "compiled"])
def test_a_long_name_is_cut_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """Two long names that differ past the limit become one name, in the slices and in the op table."""
    if reader == "compiled":
        monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0)
    store = RunStore(tmp_path / "data")
    long, other = "x" * 10_000 + "训", "x" * 10_000 + "y"
    events = flat(3, name=long) + flat(2, name="short") + flat(1, name=other)
    rec = ingest_paths(store, [trace(tmp_path / "t.json", events)], limits=IngestLimits(max_name_chars=100))
    names = store.table(rec.id, "slices").column("name").to_pylist()
    assert sorted(names) == sorted(["x" * 100] * 4 + ["short"] * 2)
    assert [(w.code, w.count) for w in rec.summary.warnings if w.code == "long_name"] == [("long_name", 4)]
    calls = {r["name"]: r["calls"] for r in store.table(rec.id, "op_stats").to_pylist()}
    assert calls == {"x" * 100: 4, "short": 2}


def test_the_cli_reads_its_limits_from_the_environment(tmp_path: Path) -> None:
    path = trace(tmp_path / "many.json", flat(600, threads=600))
    exe = Path(sys.executable).parent / "trace-explorer"
    proc = subprocess.run([str(exe), "ingest", str(path), "--data-dir", str(tmp_path / "d")], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "EXPLORER_MAX_TRACKS": "500"})
    assert proc.returncode == 2 and "EXPLORER_MAX_TRACKS" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_an_upload_fails_its_run_with_the_message(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", max_tracks=500))) as client:
        body = json.dumps({"traceEvents": flat(600, threads=600)}).encode()
        run_id = client.post("/api/runs", files={"files": ("many.json", body)}).json()["id"]
        run = wait_until_done(client, run_id)
        assert run["status"] == "failed" and "EXPLORER_MAX_TRACKS" in run["message"]
