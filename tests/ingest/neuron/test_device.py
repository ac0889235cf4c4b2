"""Neuron Parquet export with device profiles (tests/fixtures/neuron/device_export, from
make_device_fixtures.py): the published system tables, device tables stored under their own names, the
device_profiles rows and their nc_exec_running link. Expected values are read from the fixture files with
pyarrow here, never from the explorer's output."""

from __future__ import annotations

import json
import shutil
import tarfile
import zipfile
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from explorer.errors import DeviceProfileNotFound
from explorer.ingest.neuron.parquet_profile import table_kind
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

EXPORT = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "device_export"
SYSTEM = EXPORT / "system@latest"
PROFILES = {"rmsnorm_naive": EXPORT / "rmsnorm_naive@latest", "matmul": EXPORT / "matmul@latest"}


def read(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def parts(folder: Path, table: str) -> list[dict[str, Any]]:
    """A table's rows from the fixture, split parts concatenated in part order."""
    files = sorted(folder.glob(f"{table}_*.parquet")) or [folder / f"{table}.parquet"]
    return [row for f in files for row in read(f)]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunStore, str]:
    store = RunStore(tmp_path_factory.mktemp("device") / "data")
    return store, ingest_paths(store, [EXPORT]).id


def counters_by_label(store: RunStore, run_id: str) -> dict[str, list[tuple[int, float]]]:
    labels = {t["track_id"]: t["label"] for t in store.table(run_id, "tracks").to_pylist()}
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in store.table(run_id, "counters").to_pylist():
        out[labels[row["track_id"]]].append((row["ts_ns"], row["value"]))
    return {k: sorted(v) for k, v in out.items()}


def warnings_of(store: RunStore, run_id: str) -> dict[str, dict[str, Any]]:
    return {w["code"]: w for w in store.run_json(run_id)["summary"]["warnings"]}


# ---- the three system tables, with their published columns -----------------------------------------------

def test_system_hbm_usage_total_and_one_track_per_nonzero_type(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    rows = read(SYSTEM / "SystemProfileHbmUsage.parquet")
    expected: dict[str, list[tuple[int, float]]] = defaultdict(list)
    types = [c for c in rows[0] if c.endswith("_bytes") and c != "total_bytes" and any(r[c] for r in rows)]
    assert sorted(types) == ["io_bytes", "tensors_bytes", "weights_bytes"]  # the fixture's non-zero types
    for r in rows:
        where = f"device {r['device_idx']} HBM {r['hbm_idx']}"
        expected[f"{where} total [bytes]"].append((r["timestamp"], float(r["total_bytes"])))
        for c in types:
            expected[f"{where} {c.removesuffix('_bytes')} [bytes]"].append((r["timestamp"], float(r[c])))
    got = counters_by_label(store, run_id)
    assert {k: got.get(k) for k in expected} == dict(expected)
    assert not [k for k in got if "HBM" in k and k not in expected]  # all-zero types get no track


def test_system_cpu_usage_per_core_and_average(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    expected: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in read(SYSTEM / "CpuUsage.parquet"):
        expected[f"CPU {r['cpu_id']} utilization [%]"].append((r["timestamp"], r["util_percent"]))
    assert "CPU average utilization [%]" in expected
    got = counters_by_label(store, run_id)
    assert {k: got.get(k) for k in expected} == dict(expected)


def test_system_host_memory(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    rows = read(SYSTEM / "HostMemUsage.parquet")
    got = counters_by_label(store, run_id)
    assert got["host memory [bytes]"] == [(r["timestamp"], float(r["used_bytes"])) for r in rows]
    assert got["host memory [%]"] == [(r["timestamp"], r["used_percent"]) for r in rows]


# ---- device_profiles and the link to nc_exec_running --------------------------------------------------------

def test_device_profiles_rows_follow_device_profile_list(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    got = {r["profile_id"]: r for r in store.device_profiles(run_id).to_pylist()}
    listed = {r["device_profile_name"]: r for r in read(SYSTEM / "DeviceProfileList.parquet")}
    assert set(got) == set(listed) == set(PROFILES)
    for name, row in listed.items():
        meta = read(PROFILES[name] / "Metadata.parquet")[0]
        assert (got[name]["name"], got[name]["instance_id"], got[name]["process_id"], got[name]["nc_id"],
                got[name]["model_id"], got[name]["session_id"]) == (name, row["instance_id"], row["process_id"],
                                                                    row["nc_id"], row["model_id"], row["session_id"])
        assert (got[name]["start_ns"], got[name]["end_ns"]) == (meta["first_hw_timestamp"], meta["last_hw_timestamp"])
        assert got[name]["schema_version"] == meta["profile_schema_version"]
        assert set(got[name]["tables"]) == {f.stem.split("_")[0] if f.stem.startswith("Instruction_") else f.stem
                                            for f in PROFILES[name].glob("*.parquet")}


def test_each_profile_links_to_its_nc_exec_running_slice(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    events = read(SYSTEM / "SystemProfileEvents.parquet")
    slices = store.slice_rows(run_id, list(range(store.table(run_id, "slices").num_rows)))
    for p in store.device_profiles(run_id).to_pylist():
        # the fixture's execution of this profile: nc_exec_running on its NeuronCore over its span (a decoy on
        # NC 1 overlaps the first profile too)
        [event] = [e for e in events if e["name"] == "nc_exec_running" and e["nc_idx"] == p["nc_id"]
                   and e["start_ts"] == p["start_ns"] and e["end_ts"] == p["end_ns"]]
        linked = next(s for s in slices if s["slice_id"] == p["system_slice_id"])
        assert (linked["name"], linked["ts_ns"], linked["dur_ns"]) == ("nc_exec_running", event["start_ts"],
                                                                       event["duration_ns"])
        assert json.loads(linked["args"])["nc_idx"] == p["nc_id"]


def test_device_profile_without_system_profile_is_a_run_of_its_own(store: RunStore, tmp_path: Path) -> None:
    folder = tmp_path / "matmul@latest"
    shutil.copytree(PROFILES["matmul"], folder)
    rec = ingest_paths(store, [folder])
    [row] = store.device_profiles(rec.id).to_pylist()
    assert (row["profile_id"], row["system_slice_id"], row["instance_id"]) == ("matmul", -1, "")
    assert row["nc_id"] == read(PROFILES["matmul"] / "Metadata.parquet")[0]["neuroncore_idx"]
    assert store.device_table(rec.id, "matmul", "Instruction").num_rows == len(parts(PROFILES["matmul"],
                                                                                     "Instruction"))


# ---- stored tables ---------------------------------------------------------------------------------------

def test_split_instruction_tables_are_concatenated(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    files = sorted(PROFILES["rmsnorm_naive"].glob("Instruction_*.parquet"))
    assert len(files) == 2
    expected = sorted(r["id"] for f in files for r in read(f))
    stored = store.device_table(run_id, "rmsnorm_naive", "Instruction")
    assert sorted(stored.column("id").to_pylist()) == expected


@pytest.mark.parametrize(("profile", "table", "keys"), [
    ("rmsnorm_naive", "Instruction", ("timeline_track", "start_ts")),
    ("matmul", "Instruction", ("timeline_track", "start_ts")),
    ("rmsnorm_naive", "DmaPacket", ("queue_name", "start_ts")),
    ("matmul", "DmaPacket", ("queue_name", "start_ts")),
])
def test_stored_order_is_track_then_time(ingested: tuple[RunStore, str], profile: str, table: str,
                                         keys: tuple[str, str]) -> None:
    store, run_id = ingested
    stored = store.device_table(run_id, profile, table).to_pylist()
    got = [(r[keys[0]], r[keys[1]], r["id"]) for r in stored]
    source = parts(PROFILES[profile], table)
    assert got == sorted((r[keys[0]], r[keys[1]], r["id"]) for r in source)
    assert got != [(r[keys[0]], r[keys[1]], r["id"]) for r in source]  # the fixture is not already in that order


def test_times_stay_exact_int64_ns_and_engines_are_lower_case(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    for name, folder in PROFILES.items():
        stored = store.device_table(run_id, name, "Instruction")
        for col in ("start_ts", "end_ts", "duration_ns", "evt_wait_time_ns"):
            assert stored.schema.field(col).type == pa.int64()
        by_id = {r["id"]: r for r in stored.to_pylist()}
        for r in parts(folder, "Instruction"):
            assert (by_id[r["id"]]["start_ts"], by_id[r["id"]]["end_ts"]) == (r["start_ts"], r["end_ts"])
            assert by_id[r["id"]]["engine"] == r["engine"].lower()
        active = store.device_table(run_id, name, "ActiveTime").column("engine").to_pylist()
        assert active == [e.lower() for e in pq.read_table(folder / "ActiveTime.parquet").column("engine").to_pylist()]
    assert {r["engine"] for r in parts(PROFILES["matmul"], "Instruction")} >= {"Tensor", "Sync"}  # capitalised


def test_summary_and_metadata_are_stored_as_exported(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    for name, folder in PROFILES.items():
        for table in ("Summary", "Metadata", "OpcodeSummary"):
            want = read(folder / f"{table}.parquet")
            got = store.device_table(run_id, name, table).to_pylist()
            assert [{k: r[k] for k in want[0]} for r in got] == want


def test_a_table_the_export_lacks_is_empty_with_the_published_columns(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    error = store.device_table(run_id, "matmul", "Error")
    assert error.num_rows == 0
    # PROFILE_SCHEMA.md, table Error
    assert error.column_names == ["description", "error_type_id", "metadata", "metadata_hex", "pcore_idx",
                                  "timestamp", "type"]
    assert error.schema.field("timestamp").type == pa.int64()
    # a published column the export did not write comes back as nulls of its type
    instructions = store.device_table(run_id, "matmul", "Instruction")
    assert "compiler_opcode" not in pq.read_schema(PROFILES["matmul"] / "Instruction.parquet").names
    assert instructions.column("compiler_opcode").null_count == instructions.num_rows > 0
    assert instructions.schema.field("compiler_pc").type == pa.int64()
    with pytest.raises(DeviceProfileNotFound):
        store.device_table(run_id, "no-such-profile", "Instruction")
    with pytest.raises(DeviceProfileNotFound):
        store.device_table(run_id, "matmul", "NoSuchTable")


def test_a_run_without_device_profiles_has_an_empty_table(store: RunStore) -> None:
    rec = ingest_paths(store, [SYSTEM])
    assert store.device_profiles(rec.id).num_rows == 0
    assert "device_profile_missing" in warnings_of(store, rec.id)


# ---- recognition -------------------------------------------------------------------------------------

FIXTURE_FILES = sorted(EXPORT.glob("*/*.parquet"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_table_is_recognised_by_stem_and_by_columns(path: Path) -> None:
    stem = path.stem
    table, part = (stem.split("_")[0], int(stem.split("_")[1])) if stem.startswith("Instruction_") else (stem, 0)
    columns = pq.read_schema(path).names
    assert table_kind(columns, path.name) == (table, part)
    # DmaUsage has exactly HbmUsage's published columns: only its stem tells it apart
    assert table_kind(columns)[0] == ("HbmUsage" if table == "DmaUsage" else table)


def test_stem_wins_over_columns_and_a_misnamed_file_falls_back(tmp_path: Path) -> None:
    hbm_like = pq.read_schema(PROFILES["matmul"] / "HbmUsage.parquet").names
    assert table_kind(hbm_like, "DmaUsage.parquet") == ("DmaUsage", 0)  # DmaUsage has HbmUsage's columns
    assert table_kind(hbm_like, "dmausage_2.parquet") == ("DmaUsage", 2)
    instruction = pq.read_schema(PROFILES["matmul"] / "Instruction.parquet").names
    assert table_kind(instruction, "Summary.parquet") == ("Instruction", 0)  # the stem does not fit: columns decide


def test_files_with_meaningless_names_make_the_same_profiles(store: RunStore, tmp_path: Path) -> None:
    for folder in (SYSTEM, *PROFILES.values()):
        target = tmp_path / "export" / folder.name
        target.mkdir(parents=True)
        for i, f in enumerate(sorted(folder.glob("*.parquet"))):
            if not f.stem.startswith("Instruction_"):  # split parts need their stems to be told apart as parts
                shutil.copyfile(f, target / f"t{i}.parquet")
            else:
                shutil.copyfile(f, target / f.name)
    rec = ingest_paths(store, [tmp_path / "export"])
    rows = {r["profile_id"]: r for r in store.device_profiles(rec.id).to_pylist()}
    assert set(rows) == set(PROFILES)
    assert all(r["system_slice_id"] >= 0 for r in rows.values())
    assert store.device_table(rec.id, "matmul", "DmaPacket").num_rows == len(read(PROFILES["matmul"] /
                                                                                  "DmaPacket.parquet"))


# ---- containers: folder, zip, tar.gz, inside a capture folder ----------------------------------------------

def _zip(tmp_path: Path) -> Path:
    out = tmp_path / "export.zip"
    with zipfile.ZipFile(out, "w") as zf:
        for f in sorted(EXPORT.rglob("*.parquet")):
            zf.write(f, f.relative_to(EXPORT.parent).as_posix())
    return out


def _tar(tmp_path: Path) -> Path:
    out = tmp_path / "export.tar.gz"
    with tarfile.open(out, "w:gz") as tf:
        tf.add(EXPORT, arcname="device_export")
    return out


def _capture(tmp_path: Path) -> Path:
    root = tmp_path / "capture"
    shutil.copytree(EXPORT, root / "i-0123456789abcdef0_pid_4242" / "20250601T120000Z" / "parquet")
    return root


@pytest.mark.parametrize("make", [_zip, _tar, _capture], ids=["zip", "tar.gz", "capture"])
def test_containers_give_the_same_profiles(store: RunStore, tmp_path: Path, make: Any,
                                           ingested: tuple[RunStore, str]) -> None:
    ref_store, ref_id = ingested
    rec = ingest_paths(store, [make(tmp_path)])
    skip = {"source", "system_slice_id"}
    got = [{k: v for k, v in r.items() if k not in skip} for r in store.device_profiles(rec.id).to_pylist()]
    want = [{k: v for k, v in r.items() if k not in skip} for r in ref_store.device_profiles(ref_id).to_pylist()]
    assert got == want
    assert all(r["system_slice_id"] >= 0 for r in store.device_profiles(rec.id).to_pylist())
    for name in PROFILES:
        assert store.device_table(rec.id, name, "Instruction").equals(ref_store.device_table(ref_id, name,
                                                                                            "Instruction"))


# ---- warnings and atomicity --------------------------------------------------------------------------------

def _copy_export(tmp_path: Path) -> Path:
    target = tmp_path / "export"
    shutil.copytree(EXPORT, target)
    return target


def test_schema_major_other_than_7_warns(store: RunStore, tmp_path: Path) -> None:
    export = _copy_export(tmp_path)
    meta_path = export / "matmul@latest" / "Metadata.parquet"
    meta = pq.read_table(meta_path)
    version = meta.column_names.index("profile_schema_version")
    pq.write_table(meta.set_column(version, "profile_schema_version", pa.array(["8.0.1"])), meta_path)
    rec = ingest_paths(store, [export])
    warning = warnings_of(store, rec.id)["neuron_schema_version"]
    assert "8.0.1" in warning["message"] and "matmul@latest" in warning["message"]
    assert warning["count"] == 1  # the 7.4.0 profile beside it is fine


def test_schema_7_gives_no_version_warning(ingested: tuple[RunStore, str]) -> None:
    store, run_id = ingested
    assert "neuron_schema_version" not in warnings_of(store, run_id)
    assert "neuron_schema_fields" not in warnings_of(store, run_id)


def test_unknown_fields_in_schema_fields_warn(store: RunStore, tmp_path: Path) -> None:
    export = _copy_export(tmp_path)
    path = export / "system@latest" / "SchemaFields.parquet"
    fields = pq.read_table(path).to_pylist()
    pq.write_table(pa.Table.from_pylist(fields + [{**fields[0], "field_name": "brand_new_field"}]), path)
    rec = ingest_paths(store, [export])
    assert "Instruction.brand_new_field" in warnings_of(store, rec.id)["neuron_schema_fields"]["message"]


def test_an_unreadable_table_is_a_warning_naming_the_file(store: RunStore, tmp_path: Path) -> None:
    export = _copy_export(tmp_path)
    bad = export / "rmsnorm_naive@latest" / "Instruction_1.parquet"
    bad.write_bytes(b"PAR1" + b"\x00garbage" * 10)
    rec = ingest_paths(store, [export])
    warning = warnings_of(store, rec.id)["unreadable_file"]
    assert "rmsnorm_naive@latest/Instruction_1.parquet" in warning["message"]
    stored = store.device_table(rec.id, "rmsnorm_naive", "Instruction")
    assert stored.num_rows == len(read(PROFILES["rmsnorm_naive"] / "Instruction_0.parquet"))


def test_a_failing_device_table_leaves_no_run(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import explorer.store.device as device_store

    real = device_store.pq.write_table

    def failing(table: pa.Table, where: Any, **kw: Any) -> None:
        if Path(where).name == "DmaPacket.parquet":
            raise OSError("disk full")
        real(table, where, **kw)

    monkeypatch.setattr(device_store.pq, "write_table", failing)
    with pytest.raises(OSError, match="disk full"):
        ingest_paths(store, [EXPORT])
    assert store.catalog.list()[0] == []
    assert list(store.runs_dir.iterdir()) == []
    assert [p for p in store.tmp_dir.iterdir() if p.is_dir() and not p.name.startswith("ingest-")] == []


def test_device_time_columns_become_exact_int64_and_odd_ones_warn(store: RunStore, tmp_path: Path) -> None:
    folder = tmp_path / "odd@latest"
    folder.mkdir()
    starts = [1.748779200000001e18, 1.7487792000000205e18]  # floats: read as their shortest decimal text
    ends = ["1748779200000001123", "1748779200000020999"]  # text: exact
    pq.write_table(pa.table({"start_ts": starts, "end_ts": ends, "duration_ns": pa.array([1123, -5], pa.int64()),
                             "engine": ["Vector", "Scalar"], "opcode": ["A", "B"], "operands": ["", ""],
                             "id": [1, 2], "pc": [0, 16], "bir_id": ["b1", "b2"]}), folder / "Instruction.parquet")
    rec = ingest_paths(store, [folder])
    stored = store.device_table(rec.id, "odd", "Instruction").to_pylist()
    by_id = {r["id"]: r for r in stored}
    assert [by_id[i]["start_ts"] for i in (1, 2)] == [int(Decimal(repr(v))) for v in starts]
    assert [by_id[i]["end_ts"] for i in (1, 2)] == [int(v) for v in ends]
    assert (by_id[1]["duration_ns"], by_id[2]["duration_ns"]) == (1123, None)  # negative: not a duration
    assert [r["timeline_track"] for r in stored] == ["Scalar", "Vector"]  # from the engine, sorted by track
    warnings = warnings_of(store, rec.id)
    assert "float_time_column" in warnings and "bad_device_time" in warnings


def test_a_profile_outside_every_execution_is_unlinked_with_a_warning(store: RunStore, tmp_path: Path) -> None:
    export = _copy_export(tmp_path)
    meta_path = export / "matmul@latest" / "Metadata.parquet"
    meta = pq.read_table(meta_path)
    far = [v + 10**12 for v in (meta.column("first_hw_timestamp")[0].as_py(), meta.column("last_hw_timestamp")[0].as_py())]
    for name, value in zip(("first_hw_timestamp", "last_hw_timestamp"), far, strict=True):
        meta = meta.set_column(meta.column_names.index(name), name, pa.array([value], pa.int64()))
    pq.write_table(meta, meta_path)
    rec = ingest_paths(store, [export])
    links = {r["profile_id"]: r["system_slice_id"] for r in store.device_profiles(rec.id).to_pylist()}
    assert links["matmul"] == -1 and links["rmsnorm_naive"] >= 0
    warning = warnings_of(store, rec.id)["device_profile_unlinked"]
    assert (warning["count"], "matmul" in warning["message"]) == (1, True)
