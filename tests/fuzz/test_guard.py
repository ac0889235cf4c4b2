"""The ingest guard (explorer.runs.ingest.ingest_bug): an exception that is not an ExplorerError leaves the
ingest as a one-line IngestBug naming the file, stored on the failed run, with the traceback logged at
ERROR (the bug report); the CLI prints the line, never a traceback."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.errors import IngestBug
from explorer.ingest import pipeline
from explorer.runs.ingest import run_ingest
from explorer.store.runs import RunStore


def _broken(*args: object, **kwargs: object) -> dict[str, object]:
    raise KeyError("ts\nsecond line")


def _ingest_a_bug(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> tuple[RunStore, str, IngestBug]:
    """A one-event trace ingested with keep_failed, which the test has made a part of the ingest fail: the
    store, the run's id, the IngestBug raised."""
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}')
    store = RunStore(tmp_path / "data")
    rec = store.catalog.create("t", source=trace.name)
    with caplog.at_level(logging.ERROR, logger="explorer.runs.ingest"), pytest.raises(IngestBug) as info:
        run_ingest(store, rec.id, [trace], keep_failed=True)
    return store, rec.id, info.value


def test_unexpected_exception_becomes_a_clear_error_and_a_bug_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(pipeline, "parse_chrome_file", _broken)
    store, run_id, bug = _ingest_a_bug(tmp_path, caplog)
    message = bug.message
    assert message.startswith("trace.json: internal error while reading (KeyError: ")
    assert "\n" not in message and "this is a bug" in message
    assert isinstance(bug.__cause__, KeyError)
    failed = store.get(run_id)
    assert (failed.status, failed.message) == ("failed", message)
    assert not store.run_dir(run_id).exists() and list(store.tmp_dir.iterdir()) == []
    [record] = [r for r in caplog.records if r.name == "explorer.runs.ingest"]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.exc_info[0] is KeyError
    assert message.endswith(f"its report is bugs/{run_id}.txt in the data folder")
    assert "Traceback" in (store.data_dir / "bugs" / f"{run_id}.txt").read_text()


def test_cli_prints_the_line_not_a_traceback(tmp_path: Path) -> None:
    """The CLI path, in a subprocess with a parser made to fail: exit 2, one `error:` line, no traceback."""
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    code = ("import sys; from explorer.ingest import pipeline\n"
            "def broken(*a, **k): raise ZeroDivisionError('probe')\n"
            "pipeline.parse_chrome_file = broken\n"
            "from explorer.cli import main\n"
            f"sys.argv = ['x', 'ingest', {str(trace)!r}, '--data-dir', {str(tmp_path / 'd')!r}]\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    out = proc.stdout + proc.stderr
    assert "error: trace.json: internal error while reading (ZeroDivisionError: probe)" in " ".join(out.split())
    assert "Traceback" not in out
    [report] = (tmp_path / "d" / "bugs").iterdir()
    assert "ZeroDivisionError: probe" in report.read_text()


def test_a_bug_in_the_op_tables_thread_is_the_ingests_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The op tables are made on a thread beside the store's write (explorer.ingest.builder): what that thread
    raises is raised where the store reads them, and the run fails as any other bug leaves it."""
    from explorer.ingest import builder

    def broken(*args: object) -> object:
        raise ValueError("op table probe")

    monkeypatch.setattr(builder, "compute_op_stats", broken)
    store, run_id, bug = _ingest_a_bug(tmp_path, caplog)
    assert "(ValueError: op table probe)" in bug.message
    assert store.get(run_id).status == "failed"
    assert not store.run_dir(run_id).exists() and list(store.tmp_dir.iterdir()) == []
