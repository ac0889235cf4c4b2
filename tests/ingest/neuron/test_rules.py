"""Neuron system-profile formats, one fixture each (tests/fixtures/neuron/formats, Parquet made here),
and the declarative lane table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from explorer.errors import BadTrace
from explorer.ingest.neuron.parquet_profile import table_kind
from explorer.ingest.neuron.rules import NAME_RULES, Source, source_of
from explorer.model.neuron_schema import RECOGNIZERS
from explorer.runs.ingest import ingest_paths
from explorer.store.queries import load_ops
from explorer.store.runs import RunStore

FORMATS = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "formats"
T0 = 1_748_779_200_000_000_000


def run_view(store: RunStore, paths: list[Path]) -> dict[str, Any]:
    rec = ingest_paths(store, paths)
    tracks = store.table(rec.id, "tracks").to_pylist()
    slices = store.slice_rows(rec.id, list(range(store.table(rec.id, "slices").num_rows)))
    warnings = store.run_json(rec.id)["summary"]["warnings"]
    return {
        "id": rec.id,
        "tracks": tracks,
        "slices": slices,
        "labels": {(t["lane"], t["label"]) for t in tracks},
        "lanes": {lane: sum(1 for s in slices if s["lane"] == lane) for lane in {s["lane"] for s in slices}},
        "warnings": {w["code"]: w for w in warnings},
        "ops": {r["name"]: r for r in load_ops(store, rec.id)},
    }


@pytest.mark.parametrize(("name", "source"), [
    ("nc_exec_running", Source.HARDWARE),
    ("cc_running", Source.HARDWARE),
    ("dma_queue_transfer", Source.HARDWARE),
    ("nrta_execute_schedule", Source.RUNTIME),
    ("nrt_execute", Source.RUNTIME),
    ("kbl_exec_pre", Source.RUNTIME),
    ("aten::mul", Source.FRAMEWORK),
    ("something_else", Source.OTHER),
])
def test_lane_from_name(name: str, source: Source) -> None:
    assert source_of({}, name) is source


def test_source_field_wins_over_name() -> None:
    assert source_of({"trace_event_source": "neuron_hw"}, "nrta_execute_schedule") is Source.HARDWARE
    assert source_of({"category": "runtime"}, "nc_exec_running") is Source.RUNTIME


def test_every_name_rule_has_a_note() -> None:
    assert all(rule.note for rule in NAME_RULES)


FORMAT_CASES = [
    pytest.param(
        "neuron_export.json",
        {"framework": 1, "runtime": 2, "hardware": 2, "other": 1},
        {("framework", "framework/77"), ("runtime", "neuron_rt/NC:1"), ("hardware", "neuron_hw/NC:1"),
         ("other", "neuron/90")},
        {"neuron_warning", "bad_time", "neuron_unknown_source", "inferred_links"},
        {"aten::linear": 59_000},
        id="current-json-export",
    ),
    pytest.param(
        "system_profile.json",
        {"framework": 1, "runtime": 1, "hardware": 1},
        {("framework", "framework/501"), ("runtime", "neuron_rt/NC:3"), ("hardware", "neuron_hw/NC:3"),
         ("counter", "host memory [bytes]"), ("counter", "host memory [%]"),
         ("counter", "CPU 0 utilization [%]"), ("counter", "CPU 1 utilization [%]")},
        set(),
        {"aten::matmul": 45_000},
        id="profiler2-system-profile",
    ),
    pytest.param(
        "nrt_events.json",
        {"runtime": 1, "hardware": 1},
        {("runtime", "neuron_rt/NC:0"), ("hardware", "neuron_hw/NC:0")},
        {"unclosed_begin", "unmatched_end", "inferred_links", "unlinked_device"},
        # no framework op: the runtime call that launched the 30-90 µs execution is the row (kind runtime)
        {"nrta_execute_schedule": 60_000},
        id="nrt-fetch-events",
    ),
]


@pytest.mark.parametrize(("fixture", "lanes", "labels", "warnings", "device"), FORMAT_CASES)
def test_format(store: RunStore, fixture: str, lanes: dict[str, int], labels: set[tuple[str, str]],
                warnings: set[str], device: dict[str, int]) -> None:
    view = run_view(store, [FORMATS / fixture])
    assert view["lanes"] == lanes
    assert labels <= view["labels"]
    assert set(view["warnings"]) == warnings
    assert {name: row["device_total_ns"] for name, row in view["ops"].items()} == device


def test_json_export_keeps_times_fields_and_profiler_warnings(store: RunStore) -> None:
    view = run_view(store, [FORMATS / "neuron_export.json"])
    hw = next(s for s in view["slices"] if s["name"] == "nc_exec_running")
    assert (hw["ts_ns"], hw["dur_ns"], hw["cat"]) == (T0 + 135_000, 50_000, "neuron_hw")
    assert json.loads(hw["args"])["model_name"] == "linear"
    assert "trace buffer full" in view["warnings"]["neuron_warning"]["message"]
    assert view["warnings"]["bad_time"]["count"] == 1
    assert {t["instance"] for t in view["tracks"] if t["kind"] == "slice"} == {"i-0export"}
    assert {t["process"] for t in view["tracks"] if t["kind"] == "slice"} == {"PID 77"}


def test_nrt_pairs_start_and_stop_by_core_and_tracking_id(store: RunStore) -> None:
    view = run_view(store, [FORMATS / "nrt_events.json"])
    by_name = {s["name"]: s for s in view["slices"]}
    assert (by_name["nrta_execute_schedule"]["ts_ns"], by_name["nrta_execute_schedule"]["dur_ns"]) == (
        T0 + 10_000, 15_000)
    assert by_name["nc_exec_running"]["dur_ns"] == 60_000
    assert json.loads(by_name["nrta_execute_schedule"]["args"])["nrt_sequence_id"] == 51


def test_profiler2_counters_values(store: RunStore) -> None:
    rec = ingest_paths(store, [FORMATS / "system_profile.json"])
    tracks = {t["label"]: t["track_id"] for t in store.table(rec.id, "tracks").to_pylist() if t["kind"] == "counter"}
    counters = store.table(rec.id, "counters").to_pylist()
    cpu0 = [(c["ts_ns"], c["value"]) for c in counters if c["track_id"] == tracks["CPU 0 utilization [%]"]]
    assert cpu0 == [(T0, 35.0), (T0 + 50_000, 40.0)]


# ---- Parquet export: one table per file, told apart by its columns -----------------------------------

def events_table() -> pa.Table:
    rows = [
        # id, name, start, dur, source, nc, flow ids, stream id, extra attributes
        (1, "aten::softmax", 0, 90_000, "framework", None, [], 7, {}),
        (2, "nrta_execute_schedule", 10_000, 20_000, "neuron_rt", 0, [300], None, {"nrt_sequence_id": 61}),
        (3, "nc_exec_running", 35_000, 40_000, "neuron_hw", 0, [300], None, {"pc": 12}),
        (4, "nc_exec_running", 80_000, 5_000, "neuron_hw", 0, [], None, {}),
    ]
    return pa.table({
        "id": [r[0] for r in rows],
        "name": [r[1] for r in rows],
        "start_ts": [T0 + r[2] for r in rows],
        "end_ts": [T0 + r[2] + r[3] for r in rows],
        "duration_ns": [r[3] for r in rows],
        "trace_event_source": [r[4] for r in rows],
        "instance_id": ["i-0parquet"] * len(rows),
        "process_id": [900] * len(rows),
        "thread_id": [901] * len(rows),
        "nc_idx": pa.array([r[5] for r in rows], pa.int32()),
        "pcore_idx": pa.array([r[5] for r in rows], pa.int32()),
        "worker_gid": [0] * len(rows),
        "flow_id": pa.array([r[6] for r in rows], pa.list_(pa.int64())),
        "framework_stream_id": pa.array([r[7] for r in rows], pa.int64()),
        "extra_attributes_json": [json.dumps(r[8]) for r in rows],
    })


PARQUET_TABLES: dict[str, pa.Table] = {
    "SystemProfileEvents": events_table(),
    "SystemProfileHbmUsage": pa.table({"timestamp_ns": [T0, T0, T0 + 50_000], "hbm_idx": [0, 0, 0],
                                       "hbm_category": ["tensors", "model", "tensors"],
                                       "hbm_usage_bytes": [1 << 30, 1 << 28, 3 << 29]}),
    "CpuUsage": pa.table({"timestamp_ns": [T0, T0 + 50_000], "cpu_id": [0, 0], "cpu_util": [20.0, 95.5]}),
    "HostMemUsage": pa.table({"timestamp_ns": [T0], "usage": [2 << 30], "percent_usage": [25.0]}),
    "Warning": pa.table({"message": ["NeuronCore 1 was not captured"]}),
}


def write_parquet(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, table in enumerate(PARQUET_TABLES.values()):
        path = folder / f"table_{i}.parquet"  # names say nothing: columns decide
        pq.write_table(table, path)
        paths.append(path)
    return paths


@pytest.mark.parametrize("kind", list(PARQUET_TABLES))
def test_parquet_table_kind_by_columns(kind: str) -> None:
    assert table_kind(PARQUET_TABLES[kind].column_names) == (kind, 0)
    assert kind in {k.table for k in RECOGNIZERS}


def test_parquet_export(store: RunStore, tmp_path: Path) -> None:
    view = run_view(store, write_parquet(tmp_path / "profile"))
    assert view["lanes"] == {"framework": 1, "runtime": 1, "hardware": 2}
    counters = {label for lane, label in view["labels"] if lane == "counter"}
    assert counters == {"HBM 0 tensors [bytes]", "HBM 0 model [bytes]", "CPU 0 utilization [%]",
                        "host memory [bytes]", "host memory [%]"}
    assert "NeuronCore 1 was not captured" in view["warnings"]["neuron_warning"]["message"]
    # flow 300 links the schedule to its execution; the schedule sits inside the op (inferred), the
    # second execution follows the schedule on NC 0 (inferred)
    assert view["ops"]["aten::softmax"]["device_total_ns"] == 45_000
    assert view["warnings"]["inferred_links"]["count"] == 2
    hw = next(s for s in view["slices"] if s["name"] == "nc_exec_running" and s["dur_ns"] == 40_000)
    assert json.loads(hw["args"])["pc"] == 12


def test_parquet_events_link_to_kineto_by_sequence_id(store: RunStore, tmp_path: Path) -> None:
    events = events_table()
    keep = [name != "aten::softmax" for name in events.column("name").to_pylist()]
    pq.write_table(events.filter(pa.array(keep)), tmp_path / "events.parquet")
    kineto = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::softmax", "pid": 900, "tid": 1, "ts": 0.0, "dur": 9.0,
         "args": {"External id": 5}},
        {"ph": "X", "cat": "privateuse1_runtime", "name": "launch", "pid": 900, "tid": 1, "ts": 1.0, "dur": 2.0,
         "args": {"External id": 5, "nrt_sequence_id": 61}},
    ], "baseTimeNanoseconds": T0}
    (tmp_path / "trace.json").write_text(json.dumps(kineto))
    view = run_view(store, [tmp_path / "trace.json", tmp_path / "events.parquet"])
    # the 40 us execution: flow 300 <- schedule <- nrt_sequence_id 61 <- Kineto runtime call <- op;
    # the 5 us one has no key: it follows the same schedule on NC 0 (inferred)
    assert view["ops"]["aten::softmax"]["device_total_ns"] == 45_000
    assert view["warnings"]["inferred_links"]["count"] == 1
    assert "unlinked_device" not in view["warnings"]


def test_parquet_that_is_not_a_neuron_table(store: RunStore, tmp_path: Path) -> None:
    pq.write_table(pa.table({"instruction": ["MATMUL"], "cycles": [10]}), tmp_path / "Instruction.parquet")
    with pytest.raises(BadTrace, match="not a Neuron system-profile table"):
        ingest_paths(store, [tmp_path / "Instruction.parquet"])
    assert store.catalog.list()[0] == []
