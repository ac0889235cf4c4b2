"""The reference story: RMSNorm on Trainium, naive (six ops), fused (`aten::rms_norm`) and compiled,
each a capture folder (Kineto trace.json with privateuse1 events + the Neuron JSON export), checked
against the numbers of the public profiling guide; also as loose files and with clocks apart."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.store.queries import load_ops
from explorer.store.runs import RunStore

NEURON = Path(__file__).resolve().parents[2] / "fixtures" / "neuron"
PROCESS = "i-0123456789abcdef0_pid_4242/20250601T120000Z"

# name -> (calls, device time in ns, % of device time to one decimal)
NAIVE = {
    "aten::mul": (3, 1_164_500, 49.5),
    "aten::add": (1, 434_600, 18.5),
    "aten::rsqrt": (1, 415_000, 17.6),
    "aten::mean": (1, 340_800, 14.5),
}
FUSED = {"aten::rms_norm": (1, 403_000, 100.0)}
COMPILED = {"Torch-Compiled Region: 0/0": (1, 376_000, 100.0)}
NAIVE_ORDER = ["aten::mul", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"]


def op_table(store: RunStore, run_id: str) -> dict[str, tuple[int, int, float]]:
    return {r["name"]: (r["calls"], r["device_total_ns"], round(r["device_pct"], 1))
            for r in load_ops(store, run_id)}


def device_total_ns(store: RunStore, run_id: str) -> int:
    slices = store.table(run_id, "slices").to_pylist()
    return sum(s["dur_ns"] for s in slices if s["device_time"])


@pytest.mark.parametrize(("capture", "expected", "total_ns"), [
    ("rmsnorm_naive", NAIVE, 2_354_900),
    ("rmsnorm_fused", FUSED, 403_000),
    ("rmsnorm_compiled", COMPILED, 376_000),
])
def test_op_table_matches_the_guide(store: RunStore, capture: str, expected: dict[str, Any],
                                    total_ns: int) -> None:
    rec = ingest_paths(store, [NEURON / capture])
    assert op_table(store, rec.id) == expected
    assert device_total_ns(store, rec.id) == total_ns
    # the guide's "2,355 us": 1,164.5 + 340.8 + 434.6 + 415.0 = 2,354.9, shown rounded
    assert round(total_ns / 1000) == {"rmsnorm_naive": 2355, "rmsnorm_fused": 403, "rmsnorm_compiled": 376}[capture]
    assert store.run_json(rec.id)["summary"]["warnings"] == []


def test_fusion_and_compile_cut_device_time(store: RunStore) -> None:
    totals = {name: device_total_ns(store, ingest_paths(store, [NEURON / name]).id)
              for name in ("rmsnorm_naive", "rmsnorm_fused", "rmsnorm_compiled")}
    cut = {name: round(100 * (1 - totals[name] / totals["rmsnorm_naive"]), 1)
           for name in ("rmsnorm_fused", "rmsnorm_compiled")}
    assert cut == {"rmsnorm_fused": 82.9, "rmsnorm_compiled": 84.0}


def chain_of(store: RunStore, run_id: str) -> list[tuple[str, str, str, str]]:
    """For every hardware event: (op, driver call, runtime schedule, hardware) names along the flows."""
    slices = {s["slice_id"]: s for s in store.table(run_id, "slices").to_pylist()}
    into = {f["to_slice"]: f["from_slice"] for f in store.table(run_id, "flows").to_pylist()}
    chains = []
    for hw in sorted((s for s in slices.values() if s["lane"] == "hardware"), key=lambda s: s["ts_ns"]):
        sched = slices[into[hw["slice_id"]]]
        driver = slices[into[sched["slice_id"]]]
        op = slices[into[driver["slice_id"]]]
        assert op["slice_id"] == hw["op_id"] == sched["op_id"] == driver["op_id"]
        chains.append((op["name"], driver["cat"], sched["name"], hw["name"]))
    return chains


def test_every_hardware_event_links_back_to_its_op(store: RunStore) -> None:
    rec = ingest_paths(store, [NEURON / "rmsnorm_naive"])
    assert chain_of(store, rec.id) == [
        (op, "privateuse1_driver", "nrta_execute_schedule", "nc_exec_running") for op in NAIVE_ORDER]
    kinds = {f["kind"] for f in store.table(rec.id, "flows").to_pylist()}
    assert kinds == {"launch", "execute"}
    assert store.run_json(rec.id)["meta"]["neuron_links"] == {"explicit": 18, "inferred": 0, "unattributed": 0}


def test_tracks_grouped_like_neuron_explorer(store: RunStore) -> None:
    rec = ingest_paths(store, [NEURON / "rmsnorm_naive"])
    tracks = {(t["lane"], t["instance"], t["process"], t["label"])
              for t in store.table(rec.id, "tracks").to_pylist()}
    instance, process = "i-0123456789abcdef0", "PID 4242 rank 0"
    assert tracks == {
        ("framework", instance, process, "framework/4242"),
        ("framework", instance, process, "framework/Stream"),
        ("runtime", instance, process, "framework/4242"),  # privateuse1_runtime calls inside the ops
        ("runtime", instance, process, "neuron_rt/NC:0"),
        ("hardware", instance, process, "neuron_hw/NC:0"),
    }


def test_loose_files_join_like_a_capture(store: RunStore, tmp_path: Path) -> None:
    """trace.json and the system export uploaded side by side: same op table (linked by nrt_sequence_id)."""
    for name in ("trace.json", "system_profile.neuron.json"):
        shutil.copy(NEURON / "rmsnorm_naive" / PROCESS / name, tmp_path / name)
    rec = ingest_paths(store, [tmp_path / "trace.json", tmp_path / "system_profile.neuron.json"])
    assert op_table(store, rec.id) == NAIVE


@pytest.mark.parametrize("drop", [("flow_id",), ("nrt_sequence_id",), ("flow_id", "nrt_sequence_id")])
def test_time_containment_fallback(store: RunStore, tmp_path: Path, drop: tuple[str, ...]) -> None:
    """Without link keys the chain is inferred from time in the same process, and the run says so."""
    folder = tmp_path / "capture"
    shutil.copytree(NEURON / "rmsnorm_naive", folder)
    system = folder / PROCESS / "system_profile.neuron.json"
    doc = json.loads(system.read_text())
    for event in doc["trace_event"]:
        for key in drop:
            event.pop(key, None)
    system.write_text(json.dumps(doc))
    rec = ingest_paths(store, [folder])
    assert op_table(store, rec.id) == NAIVE
    warnings = {w["code"]: w for w in store.run_json(rec.id)["summary"]["warnings"]}
    inferred = {("flow_id",): 6, ("nrt_sequence_id",): 6, ("flow_id", "nrt_sequence_id"): 12}[drop]
    assert warnings["inferred_links"]["count"] == inferred
    assert "time containment" in warnings["inferred_links"]["message"]


def test_clocks_that_do_not_overlap_are_aligned_and_reported(store: RunStore, tmp_path: Path) -> None:
    folder = tmp_path / "capture"
    shutil.copytree(NEURON / "rmsnorm_naive", folder)
    system = folder / PROCESS / "system_profile.neuron.json"
    doc = json.loads(system.read_text())
    hour_ns = 3600 * 10**9
    for event in doc["trace_event"]:
        event["timestamp"] += hour_ns
    system.write_text(json.dumps(doc))
    rec = ingest_paths(store, [folder])
    assert op_table(store, rec.id) == NAIVE  # links by key survive; the lanes share one axis again
    warning = next(w for w in store.run_json(rec.id)["summary"]["warnings"] if w["code"] == "clock_mismatch")
    assert "do not overlap" in warning["message"] and "shifted by" in warning["message"]
    slices = store.table(rec.id, "slices").to_pylist()
    first_hw = min(s["ts_ns"] for s in slices if s["lane"] == "hardware")
    first_op = min(s["ts_ns"] for s in slices if s["lane"] == "framework")
    assert 0 <= first_hw - first_op < 10**6
