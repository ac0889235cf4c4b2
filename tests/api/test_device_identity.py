"""Device identity (issue 34): the device model stored with the run at ingest (`summary.devices`, from
Kineto `deviceProperties[].name` or a Neuron profile's `Metadata.instance_type`), read back from runs
stored before it existed, and shown on the overview, the runs list (with every file of a multi-file run,
issue 34 point 9) and the compare page. Expected values are read from the input files here."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from explorer.model.summary import load_summary
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from tests.analysis.collectives.symm_mem import DEVICE, write_run
from tests.api.conftest import Uploader

ROOT = Path(__file__).resolve().parents[1]
DEVICE_EXPORT = ROOT / "fixtures" / "neuron" / "device_export"
REAL = [  # small real Kineto captures with deviceProperties (../shared/traces/INDEX.md)
    "HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    "HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz",
    "HolisticTraceAnalysis/tests/data/with_gpu_user_annotation/step_based_trace_2543932.json.gz",
    "kineto/docs/traces/before_fix_trace.json",
]


def listed_devices(paths: list[Path]) -> list[dict[str, Any]]:
    """name -> distinct (host, id) over the files' deviceProperties, by plain json."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for p in paths:
        with (gzip.open(p, "rt") if p.suffix == ".gz" else p.open()) as f:
            doc = json.load(f)
        for i, d in enumerate(doc.get("deviceProperties") or []):
            seen.setdefault(d["name"].strip(), set()).add((doc.get("host_name") or "", str(d.get("id", i))))
    return [{"name": n, "count": len(k), "source": "deviceProperties"} for n, k in seen.items()]


def test_eight_rank_files_one_node_are_eight_devices_and_eight_files(client: TestClient, upload: Uploader,
                                                                     tmp_path: Path) -> None:
    paths = write_run(tmp_path / "tp8", world=8, calls=2)  # each rank's file lists the node's 8 GPUs
    run = upload(files=[(p.name, p.read_bytes()) for p in paths], name="tp8")
    assert run["summary"]["devices"] == listed_devices(paths) == [
        {"name": DEVICE, "count": 8, "source": "deviceProperties"}]
    html = client.get("/").text
    row = html[html.index(f'data-run="{run["id"]}"'):]
    row = row[:row.index("</tr>")]
    assert 'data-files="8"' in row and "8 files: rank0.json, rank1.json, rank2.json, …" in row
    assert all(p.name in row for p in paths)  # every name, in the cell's title
    assert f"8 × {DEVICE}" in row
    overview = client.get(f"/runs/{run['id']}").text
    head = overview[overview.index('id="run-devices"'):]
    assert f"8 × {DEVICE}" in head[:head.index("</div>")] and "8 files" in head[:head.index("</div>")]


def test_a_summary_stored_before_devices_reads_back_without_them() -> None:
    old = {"start_ns": 5, "end_ns": 9, "span_ns": 4, "slices": 1}
    s = load_summary(old)
    assert s.devices == [] and s.stored() == old  # nothing added to what was stored


def test_neuron_instance_type_is_the_device(store: RunStore) -> None:
    kinds = {str(pq.read_table(m, columns=["instance_type"]).column(0)[0].as_py())
             for m in DEVICE_EXPORT.glob("*/Metadata.parquet")}
    assert kinds == {"trn2.48xlarge"}
    run = ingest_paths(store, [DEVICE_EXPORT], "neuron")
    # two NeuronCore profiles of one instance (they carry no instance id): one instance
    assert [d.model_dump() for d in run.summary.devices] == [
        {"name": "trn2.48xlarge", "count": 1, "source": "neuron Metadata"}]


@pytest.mark.shared
@pytest.mark.parametrize("rel", REAL)
def test_real_captures_show_their_device_properties(shared_traces: Path, client: TestClient, upload: Uploader,
                                                    rel: str) -> None:
    path = shared_traces / rel
    truth = listed_devices([path])
    assert truth  # every file of the list names its devices
    run = upload(files=[(path.name, path.read_bytes())], name=path.name)
    assert run["status"] == "ready", run
    assert run["summary"]["devices"] == truth
    overview = client.get(f"/runs/{run['id']}").text
    head = overview[overview.index('id="run-devices"'):]
    head = head[:head.index("</div>")]
    for d in truth:
        assert f'data-count="{d["count"]}">{d["count"]} × {d["name"]}<' in head


@pytest.mark.shared
def test_compare_of_two_real_captures_on_different_gpus_warns(shared_traces: Path, client: TestClient,
                                                              upload: Uploader) -> None:
    paths = [shared_traces / REAL[1], shared_traces / REAL[3]]  # 8 x A100 listed; 2 x Quadro GP100 listed
    ids = [upload(files=[(p.name, p.read_bytes())], name=p.name)["id"] for p in paths]
    body = client.get(f"/api/compare?runs={ids[0]},{ids[1]}").json()
    assert [r["devices"] for r in body["runs"]] == [listed_devices([p]) for p in paths]
    warning = next(w for w in body["warnings"] if w["code"] == "devices")
    assert all(d["name"] in warning["message"] for p in paths for d in listed_devices([p]))
    html = client.get(f"/compare?runs={ids[0]},{ids[1]}").text
    assert all(f'{d["count"]} × {d["name"]}' in html for p in paths for d in listed_devices([p]))


def test_a_hostile_device_name_is_escaped_and_bounded(client: TestClient, upload: Uploader) -> None:
    from tests.api.test_compare_headline import trace

    name = "<img src=x onerror=alert(1)>" + "G" * 500
    run = upload(files=[("h.json", trace([100], [10], name))], name="hostile device")
    assert run["summary"]["devices"][0]["name"] == name[:200]
    for html in (client.get("/").text, client.get(f"/runs/{run['id']}").text):
        assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
