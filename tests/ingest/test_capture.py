"""Neuron capture folders and archives: two processes joined into one run, binaries listed with how to
convert them, and bad captures (binaries only, no system profile, pids that disagree, unsafe archives)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.store.queries import load_ops
from explorer.store.runs import RunStore

NEURON = Path(__file__).resolve().parent.parent / "fixtures" / "neuron"
TWO = NEURON / "capture_two_procs"
INSTANCE = "i-0123456789abcdef0"
BINARIES = ["cpu_util.pb", "host_mem.pb", "model.neff", "ntrace.pb", "profile.ntff", "trace_info.pb"]


def warnings_of(store: RunStore, run_id: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for w in store.run_json(run_id)["summary"]["warnings"]:
        out.setdefault(w["code"], []).append(w)
    return out


def pack(folder: Path, dest: Path, kind: str) -> Path:
    """The capture as a .zip or .tar.gz whose member paths start with the capture folder's name."""
    if kind == "zip":
        with zipfile.ZipFile(dest, "w") as zf:
            for file in sorted(folder.rglob("*")):
                if file.is_file():
                    zf.write(file, file.relative_to(folder.parent).as_posix())
    else:
        with tarfile.open(dest, "w:gz") as tf:
            tf.add(folder, arcname=folder.name)
    return dest


@pytest.mark.parametrize("form", ["folder", "zip", "tar.gz"])
def test_two_processes_become_one_run(store: RunStore, tmp_path: Path, form: str) -> None:
    path = TWO if form == "folder" else pack(TWO, tmp_path / f"capture.{form}", form)
    rec = ingest_paths(store, [path])
    ops = {r["name"]: (r["calls"], r["device_total_ns"]) for r in load_ops(store, rec.id)}
    assert ops == {"aten::mul": (6, 2_329_000), "aten::add": (2, 869_200), "aten::rsqrt": (2, 830_000),
                   "aten::mean": (2, 681_600)}
    tracks = store.table(rec.id, "tracks").to_pylist()
    processes = {(t["instance"], t["process"]) for t in tracks}
    assert processes == {(INSTANCE, "PID 1001 rank 0"), (INSTANCE, "PID 1002 rank 1")}
    hw = {(t["process"], t["label"]) for t in tracks if t["lane"] == "hardware"}
    # two ranks in the run: every label names its rank first (issue 14)
    assert hw == {("PID 1001 rank 0", "rank 0 · neuron_hw/NC:0"), ("PID 1002 rank 1", "rank 1 · neuron_hw/NC:0")}
    warnings = warnings_of(store, rec.id)
    # process 1002 has NRT records without link keys: its 6 schedules and 6 executions are inferred
    assert warnings["inferred_links"][0]["count"] == 12
    assert len(warnings["neuron_binary"]) == 2
    for w in warnings["neuron_binary"]:
        assert all(name in w["message"] for name in BINARIES)
        assert "neuron-explorer view --output-format json" in w["message"]
    meta = store.run_json(rec.id)["meta"]
    assert sorted(p["pid"] for p in meta["capture"]) == ["1001", "1002"]
    assert all(len(p["binaries"]) == 6 and len(p["files"]) == 2 for p in meta["capture"])


def test_folder_keeps_every_file_as_an_artifact(store: RunStore) -> None:
    rec = ingest_paths(store, [TWO])
    artifacts = store.run_json(rec.id)["summary"]["artifacts"]
    assert len(artifacts) == 2 * (len(BINARIES) + 2)
    assert {Path(a["name"]).name for a in artifacts} >= set(BINARIES)


def test_processes_share_one_absolute_time_axis(store: RunStore) -> None:
    rec = ingest_paths(store, [TWO])
    slices = store.table(rec.id, "slices").to_pylist()
    tracks = {t["track_id"]: t["process"] for t in store.table(rec.id, "tracks").to_pylist()}
    first = {}
    for s in slices:
        if s["lane"] == "framework":
            p = tracks[s["track_id"]]
            first[p] = min(first.get(p, s["ts_ns"]), s["ts_ns"])
    assert set(first.values()) == {1_748_779_200_000_000_000 + 100_000}


def copy_process(tmp_path: Path, keep: list[str], pid: str = "1001") -> Path:
    src = TWO / f"{INSTANCE}_pid_{pid}" / "20250601T120000Z"
    dest = tmp_path / "capture" / f"{INSTANCE}_pid_{pid}" / "20250601T120000Z"
    dest.mkdir(parents=True)
    for name in keep:
        shutil.copy(src / name, dest / name)
    return tmp_path / "capture"


def test_only_binaries_is_a_ready_run_that_keeps_them(store: RunStore, tmp_path: Path) -> None:
    """Issue 41: a capture of Neuron binaries alone is no failure: a ready run holds them, says what each is
    and how to convert them."""
    folder = copy_process(tmp_path, BINARIES)
    rec = ingest_paths(store, [folder])
    summary = store.run_json(rec.id)["summary"]
    assert sorted(a["name"].rsplit("/", 1)[-1] for a in summary["artifacts"]) == sorted(BINARIES)
    kinds = {f["name"].rsplit("/", 1)[-1]: f["kind"] for f in summary["neuron_files"]}
    assert kinds == {name: name.rsplit(".", 1)[-1] for name in BINARIES}
    warning = warnings_of(store, rec.id)["neuron_binary"][0]["message"]
    assert all(name in warning for name in BINARIES) and "neuron-explorer view --output-format json" in warning


def test_framework_trace_without_system_profile(store: RunStore, tmp_path: Path) -> None:
    rec = ingest_paths(store, [copy_process(tmp_path, ["trace.json", "ntrace.pb", "trace_info.pb"])])
    warnings = warnings_of(store, rec.id)
    assert "no readable Neuron system profile" in warnings["neuron_no_system_profile"][0]["message"]
    assert "ntrace.pb, trace_info.pb" in warnings["neuron_binary"][0]["message"]
    ops = load_ops(store, rec.id)
    assert {r["name"] for r in ops} == {"aten::mul", "aten::mean", "aten::add", "aten::rsqrt"}
    assert all(r["device_total_ns"] == 0 for r in ops)


def test_loose_framework_trace_with_neuron_events_but_no_system_profile(store: RunStore) -> None:
    rec = ingest_paths(store, [TWO / f"{INSTANCE}_pid_1001" / "20250601T120000Z" / "trace.json"])
    # a lone file is not a capture folder, yet its privateuse1 events say a system profile is missing
    assert "neuron_no_system_profile" in warnings_of(store, rec.id)


def test_system_profile_without_framework_trace(store: RunStore, tmp_path: Path) -> None:
    rec = ingest_paths(store, [copy_process(tmp_path, ["system_profile.neuron.json"])])
    warnings = warnings_of(store, rec.id)
    assert "neuron_no_framework_trace" in warnings
    assert warnings["unlinked_device"][0]["count"] == 6


def test_mismatched_process_ids(store: RunStore, tmp_path: Path) -> None:
    folder = copy_process(tmp_path, ["trace.json", "system_profile.neuron.json"])
    system = next(folder.rglob("system_profile.neuron.json"))
    doc = json.loads(system.read_text())
    for event in doc["trace_event"]:
        event["process_id"] = 7777
    system.write_text(json.dumps(doc))
    rec = ingest_paths(store, [folder])
    warning = warnings_of(store, rec.id)["pid_mismatch"][0]["message"]
    assert "1001" in warning and "7777" in warning and "joined as one process" in warning
    # joined by folder: the links by key still hold across the differing pids
    assert {r["name"]: r["device_total_ns"] for r in load_ops(store, rec.id)}["aten::add"] == 434_600


def test_two_ranks_as_loose_kineto_files(store: RunStore, tmp_path: Path) -> None:
    """Multi-file runs outside captures: Kineto distributedInfo ranks name the instances."""
    for pid, name in (("1001", "trace.json"), ("1002", "neuron_framework_trace_rank_1.json")):
        shutil.copy(TWO / f"{INSTANCE}_pid_{pid}" / "20250601T120000Z" / name, tmp_path / f"{pid}.json")
    rec = ingest_paths(store, [tmp_path / "1001.json", tmp_path / "1002.json"])
    instances = {t["instance"] for t in store.table(rec.id, "tracks").to_pylist()}
    assert instances == {"rank 0", "rank 1"}


# ---- unsafe archives: nothing is written outside the data folder -------------------------------------

def evil_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        base = f"cap/{INSTANCE}_pid_1001/20250601T120000Z/"
        zf.write(TWO / f"{INSTANCE}_pid_1001" / "20250601T120000Z" / "trace.json", base + "trace.json")
        zf.writestr("../escaped.json", "{}")
        zf.writestr("/abs/escaped.json", "{}")
        link = zipfile.ZipInfo(base + "link.json")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "../../../escaped.json")
    return path


def evil_tar(path: Path) -> Path:
    trace = (TWO / f"{INSTANCE}_pid_1001" / "20250601T120000Z" / "trace.json").read_bytes()
    with tarfile.open(path, "w:gz") as tf:
        def add(name: str, data: bytes = b"{}", kind: bytes = tarfile.REGTYPE, target: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tf.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add(f"cap/{INSTANCE}_pid_1001/20250601T120000Z/trace.json", trace)
        add("../../escaped.json")
        add("/tmp/escaped-abs.json")
        add(f"cap/{INSTANCE}_pid_1001/20250601T120000Z/sym.json", kind=tarfile.SYMTYPE, target="/etc/passwd")
        add(f"cap/{INSTANCE}_pid_1001/20250601T120000Z/hard.json", kind=tarfile.LNKTYPE, target="../../escaped.json")
    return path


def tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.parametrize("make", [evil_zip, evil_tar], ids=["zip", "tar.gz"])
def test_unsafe_archive_members_are_skipped_and_nothing_escapes(store: RunStore, tmp_path: Path, make: Any) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    archive = make(inbox / ("evil.zip" if make is evil_zip else "evil.tar.gz"))
    outside_before = tree(tmp_path) - {p for p in tree(tmp_path) if p.startswith("data")}
    rec = ingest_paths(store, [archive])
    outside_after = {p for p in tree(tmp_path) if not p.startswith("data")}
    assert outside_after == outside_before
    assert not any((d / "escaped.json").exists() for d in (tmp_path, tmp_path.parent, inbox.parent))
    assert not Path("/tmp/escaped-abs.json").exists()
    skipped = warnings_of(store, rec.id)["skipped_file"]
    assert len(skipped) >= 3
    assert any("link" in w["message"] for w in skipped)
    assert any("'..'" in w["message"] or "absolute" in w["message"] for w in skipped)
    assert {r["name"] for r in load_ops(store, rec.id)} >= {"aten::mul"}


def test_system_export_repeating_the_framework_trace_is_not_counted_twice(store: RunStore, tmp_path: Path) -> None:
    folder = copy_process(tmp_path, ["trace.json", "system_profile.neuron.json"])
    system = next(folder.rglob("system_profile.neuron.json"))
    doc = json.loads(system.read_text())
    doc["trace_event"].append({"name": "aten::add", "trace_event_source": "framework", "process_id": 1001,
                               "thread_id": 1001, "timestamp": 1_748_779_200_000_100_000, "duration": 50_000})
    system.write_text(json.dumps(doc))
    rec = ingest_paths(store, [folder])
    assert warnings_of(store, rec.id)["neuron_duplicate_framework"][0]["count"] == 1
    assert {r["name"]: r["calls"] for r in load_ops(store, rec.id)}["aten::add"] == 1


def test_a_capture_reads_the_same_on_both_parser_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture folder whose framework trace is big enough for a fast path (forced here) comes after
    its Neuron system profile was read event by event: the two kinds of slices join, and the run's tables
    equal those of the msgspec path on the compiled reader and on DuckDB's (this used to fail as an ingest bug)."""
    from tests.helpers.parsers import PATHS, use_parser

    tables = {}
    for parser in PATHS:
        use_parser(monkeypatch, parser)
        store = RunStore(tmp_path / parser)
        rec = ingest_paths(store, [TWO])
        assert rec.status == "ready"
        slices = store.table(rec.id, "slices").drop_columns(["slice_id", "parent_id", "op_id"]).to_pylist()
        tables[parser] = sorted(slices, key=lambda r: (r["ts_ns"], r["track_id"], r["name"], r["dur_ns"]))
    assert tables["duckdb"] == tables["msgspec"] == tables["native"] and len(tables["duckdb"]) > 10
