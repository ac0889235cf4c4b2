"""The CLI on good and bad input: clear errors naming the file and the problem, nothing left behind."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from api.cli import main
from explorer.store.runs import RunStore

GOOD = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.5},
                        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 5.0, "dur": 1.5}]}


def event_file(events: list[dict[str, object]]) -> bytes:
    return json.dumps({"traceEvents": events}).encode()


BAD_INPUTS: list[tuple[str, str, bytes, str]] = [
    ("empty", "empty.json", b"", "empty"),
    ("not_json", "notes.json", b"hello, this is not a trace", "not a recognized trace format"),
    ("broken_json", "broken.json", b'{"traceEvents": [{"ph": "X", "ts": 1,', "not valid JSON"),
    ("mistyped_then_broken", "mixed.json", b'{"traceEvents": [{"ph": "X", "ts": "soon"}], "x": }', "not valid JSON"),
    ("no_events", "meta.json", b'{"schemaVersion": 1, "traceEvents": []}', "no events"),
    ("wrong_types", "types.json", event_file([{"ph": "X", "name": {"a": 1}, "ts": [1], "pid": 1, "tid": 1}]),
     "wrong type"),
    ("nan_time", "nan.json", b'{"traceEvents": [{"ph": "X", "name": "a", "ts": NaN, "dur": 1}]}', "not valid JSON"),
    ("negative_time", "neg.json", event_file([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": -5, "dur": 1}]),
     "negative"),
    ("beyond_2_63", "huge.json", event_file([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 2**70, "dur": 1}]),
     "out-of-range"),
    ("truncated_gzip", "trace.json.gz", gzip.compress(json.dumps(GOOD).encode())[:-12], "truncated gzip"),
    # the reliability run's reproductions: each used to end in a traceback
    ("mistyped_then_truncated", "loose.json", b'{"traceEvents":[{"ph":"X","ts":"a"},{"ph":"X",', "not valid JSON"),
    ("ts_1e999", "inf.json", b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1e999,"dur":1}]}',
     "out-of-range"),
    ("ts_1e308", "big.json", b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1e308,"dur":1}]}',
     "out-of-range"),
    ("ts_5000_digits", "digits.json",
     b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":' + b"9" * 5000 + b',"dur":1}]}', "out of range"),
    ("args_100k_deep", "deep.json", b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":'
     + b"[" * 100_000 + b"]" * 100_000 + b"}]}", "nested too deep"),
    ("invalid_utf8", "utf8.json", b'{"traceEvents":[{"ph":"X","name":"a\xff\xfe","pid":1,"tid":1,"ts":1,"dur":1}]}',
     "Invalid UTF-8"),
    ("neuron_list_tracking_id", "nrt.json", json.dumps({"events": [
        {"phase": "start", "nc_idx": 0, "tracking_id": [1, 2], "timestamp_ns": 10, "event_type": "nrt_execute"},
        {"phase": "stop", "nc_idx": 0, "tracking_id": [1, 2], "timestamp_ns": 20, "event_type": "nrt_execute"},
        {"phase": "stop", "nc_idx": 0, "tracking_id": {"x": 1}, "timestamp_ns": 30, "event_type": "nrt_execute"},
    ]}).encode(), None),
]


@pytest.mark.parametrize(("case", "filename", "content", "problem"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_a_clear_error_and_leaves_no_run(tmp_path: Path, case: str, filename: str, content: bytes,
                                                      problem: str | None) -> None:
    path = tmp_path / filename
    path.write_bytes(content)
    data = tmp_path / "data"
    result = CliRunner().invoke(main, ["ingest", str(path), "--data-dir", str(data)])
    if problem is None:  # not an error: odd but readable input is ingested, with what it dropped warned about
        assert result.exit_code == 0 and result.exception is None, result.output
        return
    assert result.exit_code == 2, result.output
    message = result.stderr
    assert "error" in message and filename.removesuffix(".gz") in message and problem in message, message
    assert "Traceback" not in message and len(message.strip().splitlines()) == 1, message  # one line, unwrapped
    store = RunStore(data)
    assert store.catalog.list()[0] == []
    assert list(store.runs_dir.iterdir()) == [] and list(store.tmp_dir.iterdir()) == []


def test_ingest_runs_ops_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD))
    data = str(tmp_path / "data")
    runner = CliRunner()
    ingested = runner.invoke(main, ["ingest", str(path), "--name", "tiny", "--data-dir", data])
    assert ingested.exit_code == 0, ingested.output
    run_id = ingested.stdout.strip().splitlines()[-1]
    runs = json.loads(runner.invoke(main, ["runs", "--json", "--data-dir", data]).stdout)
    assert [(r["id"], r["name"], r["status"], r["slices"]) for r in runs] == [(run_id, "tiny", "ready", 2)]
    assert runs[0]["slices_per_lane"] == {"framework": 2}
    ops = json.loads(runner.invoke(main, ["ops", run_id, "--json", "--data-dir", data]).stdout)
    assert ops == [{"name": "aten::mul", "kind": "operator", "calls": 2, "cpu_total_ns": 4000, "self_cpu_ns": 4000, "cpu_avg_ns": 2000,
                    "device_total_ns": 0, "self_device_ns": 0, "device_pct": 0.0, "work": None}]


def test_console_script_reports_errors_with_exit_code(tmp_path: Path) -> None:
    empty = tmp_path / "zero.json"
    empty.write_bytes(b"")
    exe = Path(sys.executable).parent / "trace-explorer"
    proc = subprocess.run([str(exe), "ingest", str(empty), "--data-dir", str(tmp_path / "d")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "zero.json" in proc.stderr and "empty" in proc.stderr


FRAMES = Path(__file__).resolve().parent / "fixtures" / "kineto_recursive_frames.json"


def test_ops_views_and_default_sort(tmp_path: Path) -> None:
    from explorer.cli import OP_VIEW_CHOICES
    from explorer.store.queries import OP_VIEWS

    assert tuple(OP_VIEWS) == OP_VIEW_CHOICES
    data = str(tmp_path / "data")
    runner = CliRunner()
    run_id = runner.invoke(main, ["ingest", str(FRAMES), "--data-dir", data]).stdout.strip().splitlines()[-1]
    events = [e for e in json.loads(FRAMES.read_text())["traceEvents"] if e.get("ph") == "X"]
    python_only = ({e["name"] for e in events if e["cat"] == "python_function"}
                   - {e["name"] for e in events if e["cat"] != "python_function"})

    def ops(*args: str) -> list[dict[str, object]]:
        result = runner.invoke(main, ["ops", run_id, "--json", "--data-dir", data, *args])
        assert result.exit_code == 0, result.output
        rows: list[dict[str, object]] = json.loads(result.stdout)
        return rows

    assert {r["name"] for r in ops("--view", "python")} == python_only
    operators = ops()

    def inside(e: dict[str, Any], call: dict[str, Any]) -> bool:
        return bool(e["ts"] <= call["ts"] and call["ts"] + call["dur"] <= e["ts"] + e["dur"])

    # the python frames the operators view lists: innermost frames around a launch with no op around it
    launch_frames = set()
    for call in (e for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")):
        if not any(inside(e, call) for e in events if e["cat"] in ("cpu_op", "user_annotation")):
            frames = [e for e in events if e["cat"] == "python_function" and inside(e, call)]
            launch_frames |= {max(frames, key=lambda e: e["ts"])["name"]} if frames else set()
    assert launch_frames and {r["name"] for r in operators} & python_only == launch_frames
    self_dev = [int(str(r["self_device_ns"])) for r in operators]
    assert self_dev == sorted(self_dev, reverse=True) and self_dev[0] > 0
    assert ("Net_0/Linear_0", "aten::mm") in {(r["module"], r["name"]) for r in ops("--by-module")}
    table = runner.invoke(main, ["ops", run_id, "--view", "all", "--by-module", "--data-dir", data])
    assert table.exit_code == 0 and "Net_0/Linear_0" in table.stdout
    assert runner.invoke(main, ["ops", run_id, "--view", "kernels", "--data-dir", data]).exit_code == 2


def test_runs_without_a_data_dir_says_which_folder_it_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default data folder does not depend on the working directory; read commands never create one and
    name it when it is missing; an ./explorer-data of an earlier version is adopted, and said so."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv("EXPLORER_DATA_DIR", raising=False)
    default = home / "trace-explorer"
    work, other_dir = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other_dir.mkdir()
    monkeypatch.chdir(work)
    runner = CliRunner()
    empty = runner.invoke(main, ["runs"])
    assert empty.exit_code == 0 and f"no data folder at {default}" in empty.stderr
    assert "--data-dir" in empty.stderr and not default.exists()  # nothing created
    assert json.loads(runner.invoke(main, ["runs", "--json"]).stdout) == []
    ops = runner.invoke(main, ["ops", "r123"])
    assert ops.exit_code == 2 and str(default) in ops.stderr  # the folder read is named
    if not os.environ.get("EXPLORER_TEST_CATALOG_URL"):  # a catalog database does not need the folder to be read
        assert f"no data folder at {default}" in ops.stderr and not default.exists()

    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD))
    assert runner.invoke(main, ["ingest", str(path)]).exit_code == 0
    monkeypatch.chdir(other_dir)  # another working directory reads the same folder
    listed = runner.invoke(main, ["runs"])
    assert f"1 run in {default}" in listed.stderr and "good" in listed.stdout

    legacy = other_dir / "explorer-data"
    assert runner.invoke(main, ["ingest", str(path), "--data-dir", str(legacy)]).exit_code == 0
    adopted = runner.invoke(main, ["runs"])
    assert f"using {legacy}, found in the current folder" in adopted.stderr
    assert f"1 run in {legacy}" in adopted.stderr

    other = tmp_path / "elsewhere"
    monkeypatch.setenv("EXPLORER_DATA_DIR", str(other))
    assert f"no data folder at {other}" in runner.invoke(main, ["runs"]).stderr


MARKUP_NAMES = ["load [/data/shard_0.bin]", "[param|cuda]", "[bold]v2", ":smile: op", "[red]x[/red]"]


def test_names_are_printed_literally_never_as_markup(tmp_path: Path) -> None:
    """Rich markup and emoji codes in op and run names: printed as written, in tables and in messages."""
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 1.0 + 10 * k, "dur": 2.5}
              for k, name in enumerate(MARKUP_NAMES)]
    path = tmp_path / "markup.json"
    path.write_bytes(event_file(events))
    data = str(tmp_path / "data")
    runner = CliRunner()
    ingested = runner.invoke(main, ["ingest", str(path), "--name", "[bold]v2", "--data-dir", data])
    assert ingested.exit_code == 0, ingested.output
    run_id = ingested.stdout.strip().splitlines()[-1]
    table = runner.invoke(main, ["ops", run_id, "--data-dir", data])
    assert table.exit_code == 0, table.output
    for name in MARKUP_NAMES:
        assert name in table.stdout, (name, table.stdout)
    runs = runner.invoke(main, ["runs", "--data-dir", data])
    assert runs.exit_code == 0 and "[bold]v2" in runs.stdout, runs.stdout


def test_every_command_takes_a_run_by_id_name_or_tag(tmp_path: Path) -> None:
    """ops, report and export accept the run as check does: its id, its exact name, tag:NAME@latest; an unknown
    name names the data folder; two runs of one name ask for an id."""
    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD))
    data = tmp_path / "data"
    runner = CliRunner()
    first = runner.invoke(main, ["ingest", str(path), "--name", "baseline run", "--tag", "nightly",
                                 "--data-dir", str(data)]).stdout.strip().splitlines()[-1]
    for ref in (first, "baseline run", "tag:nightly@latest"):
        result = runner.invoke(main, ["ops", ref, "--json", "--data-dir", str(data)])
        assert result.exit_code == 0, (ref, result.output)
        assert [r["name"] for r in json.loads(result.stdout)] == ["aten::mul"]
    report = runner.invoke(main, ["report", "baseline run", "-o", str(tmp_path / "r.html"), "--data-dir", str(data)])
    assert report.exit_code == 0 and (tmp_path / "r.html").stat().st_size > 0, report.output
    export = runner.invoke(main, ["export", "baseline run", "-o", str(tmp_path / "p.json"), "--data-dir", str(data)])
    assert export.exit_code == 0 and json.loads((tmp_path / "p.json").read_text())["traceEvents"], export.output
    missing = runner.invoke(main, ["ops", "no such run", "--data-dir", str(data)])
    assert missing.exit_code == 2 and f"no run with id or name 'no such run' in the data folder {data}" in missing.stderr
    runner.invoke(main, ["ingest", str(path), "--name", "baseline run", "--again", "--data-dir", str(data)])
    twice = runner.invoke(main, ["ops", "baseline run", "--data-dir", str(data)])
    assert twice.exit_code == 2 and "2 runs are named 'baseline run'" in twice.stderr and first in twice.stderr


def test_ops_sort_takes_the_api_form_and_its_help_is_true(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10.0 * k, "dur": dur}
              for k, (name, dur) in enumerate([("b_op", 3.0), ("a_op", 1.0), ("c_op", 2.0)])]
    path = tmp_path / "t.json"
    path.write_bytes(event_file(events))
    data = str(tmp_path / "data")
    runner = CliRunner()
    run_id = runner.invoke(main, ["ingest", str(path), "--data-dir", data]).stdout.strip().splitlines()[-1]

    def names(*sort: str) -> list[str]:
        result = runner.invoke(main, ["ops", run_id, "--json", "--data-dir", data, *sort])
        assert result.exit_code == 0, result.output
        return [r["name"] for r in json.loads(result.stdout)]

    assert names("--sort", "-self_cpu_ns") == names("--sort", "self_cpu_ns") == ["b_op", "c_op", "a_op"]
    assert names("--sort", "+self_cpu_ns") == ["a_op", "c_op", "b_op"]
    assert names("--sort", "name") == names("--sort", "+name") == ["a_op", "b_op", "c_op"]
    assert names("--sort", "-name") == ["c_op", "b_op", "a_op"]
    bad = runner.invoke(main, ["ops", run_id, "--sort", "-bogus", "--data-dir", data])
    assert bad.exit_code == 2 and "sort by one of" in bad.output
    help_text = " ".join(runner.invoke(main, ["ops", "--help"]).output.split())
    assert "-col descending, +col ascending; a bare column sorts descending, except name (ascending)" in help_text


def test_check_help_shows_the_default_threshold() -> None:
    from explorer.analysis.check import DEFAULT_MAX_REGRESSION
    from explorer.cli import CHECK_DEFAULT_MAX_REGRESSION

    assert CHECK_DEFAULT_MAX_REGRESSION == DEFAULT_MAX_REGRESSION
    text = " ".join(CliRunner().invoke(main, ["check", "--help"]).output.split())
    assert f"[default: {DEFAULT_MAX_REGRESSION}]" in text and "explorer.analysis" not in text


def test_an_identical_reingest_reuses_the_run_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD))
    data = str(tmp_path / "data")
    runner = CliRunner()
    first = runner.invoke(main, ["ingest", str(path), "--data-dir", data])
    run_id = first.stdout.strip().splitlines()[-1]
    again = runner.invoke(main, ["ingest", str(path), "--tag", "nightly", "--data-dir", data])
    assert again.exit_code == 0 and again.stdout.strip().splitlines()[-1] == run_id
    assert f"already ingested: run {run_id}" in again.stderr and "--again" in again.stderr
    runs = json.loads(runner.invoke(main, ["runs", "--json", "--data-dir", data]).stdout)
    assert [(r["id"], r["tags"]) for r in runs] == [(run_id, ["nightly"])]
    forced = runner.invoke(main, ["ingest", str(path), "--again", "--data-dir", data])
    assert forced.exit_code == 0 and forced.stdout.strip().splitlines()[-1] != run_id
    assert len(json.loads(runner.invoke(main, ["runs", "--json", "--data-dir", data]).stdout)) == 2


def test_an_empty_or_cut_ops_view_explains_itself(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{k}", "pid": 1, "tid": 1, "ts": 10.0 * k, "dur": 1.0}
              for k in range(5)]
    path = tmp_path / "t.json"
    path.write_bytes(event_file(events))
    data = str(tmp_path / "data")
    runner = CliRunner()
    run_id = runner.invoke(main, ["ingest", str(path), "--data-dir", data]).stdout.strip().splitlines()[-1]
    python = runner.invoke(main, ["ops", run_id, "--view", "python", "--data-dir", data])
    assert python.exit_code == 0 and "no Python frames in this run" in python.stderr and "with_stack=True" in python.stderr
    cut = runner.invoke(main, ["ops", run_id, "--limit", "2", "--data-dir", data])
    assert cut.exit_code == 0 and "showing 2 of 5 rows" in cut.stderr
    whole = runner.invoke(main, ["ops", run_id, "--data-dir", data])
    assert "showing" not in whole.stderr and json.loads(runner.invoke(
        main, ["ops", run_id, "--limit", "2", "--json", "--data-dir", data]).stdout).__len__() == 2


def test_a_new_trace_is_not_hashed_before_its_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """find_identical reads a file's bytes only when a ready run has files of the same sizes (the ingest hashes
    them anyway): a new trace is read once, an identical one is found."""
    from explorer.runs import ingest as service
    from explorer.runs import records

    store = RunStore(tmp_path / "data")
    first, other = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(GOOD))
    other.write_text(json.dumps({"traceEvents": GOOD["traceEvents"][:1]}))
    run = service.ingest_paths(store, [first])
    hashed: list[Path] = []
    real = records.sha256_file
    monkeypatch.setattr(records, "sha256_file", lambda p: hashed.append(p) or real(p))
    assert records.find_identical(store, [other]) is None and hashed == []
    found = records.find_identical(store, [first])
    assert found is not None and found.id == run.id and hashed == [first]
