"""What a killed CLI ingest left is recovered by the next CLI command on the data folder (not only by `serve`):
a run whose lease holder (a process id on this host) is dead is marked failed, saying the ingest was killed,
and its scratch in tmp/ is removed; a live ingest, and a live server's uploads, are left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from explorer.store.runs import RunStore
from tests.helpers.support import cli
from tests.runs.test_ingest_lifecycle import big_trace, paused_while_ingesting

__all__ = ["big_trace"]  # the module's fixture, used here too


def runs_json(data: Path) -> list[dict[str, object]]:
    done = subprocess.run(cli("runs", "--json", "--data-dir", str(data)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


@pytest.mark.slow
def test_kill_9_of_a_cli_ingest_is_recovered_by_the_next_runs(big_trace: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with paused_while_ingesting(big_trace, data) as (proc, run_id):
        assert list((data / "tmp").iterdir()) != []  # its scratch: what must not outlive it
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    rows = runs_json(data)
    assert [(r["id"], r["status"]) for r in rows] == [(run_id, "failed")]
    message = str(rows[0]["message"])
    assert "killed" in message and f"pid {proc.pid}" in message
    assert list((data / "tmp").iterdir()) == []


@pytest.mark.slow
def test_a_cli_command_during_a_live_ingest_leaves_it_alone(big_trace: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with paused_while_ingesting(big_trace, data) as (proc, run_id):
        scratch_before = sorted(p.name for p in (data / "tmp").iterdir())
        assert [(r["id"], r["status"]) for r in runs_json(data)] == [(run_id, "ingesting")]
        assert sorted(p.name for p in (data / "tmp").iterdir()) == scratch_before
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert RunStore(data).catalog.get(run_id).status == "ready"
    assert list((data / "tmp").iterdir()) == []


def test_runs_without_a_lease_and_other_scratch_are_left_alone(tmp_path: Path) -> None:
    """A live server's queued upload holds no lease yet, and its body streams into tmp/upload-*: neither is a
    killed CLI ingest's."""
    store = RunStore(tmp_path / "data")
    queued = store.catalog.create("queued upload", source="a.json")
    receiving = store.tmp_dir / "upload-0123456789abcdef"
    receiving.mkdir()
    assert store.recover_dead_ingests() == 0
    assert store.catalog.get(queued.id).status == "queued" and receiving.is_dir()
