"""Memory beyond the memory page, through the app: the op table's memory columns on the ops page and its twin, and
memory in compare (issue 38), on real torch.profiler(profile_memory=True) captures made here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Uploader, assert_error
from tests.helpers.memory_profiles import read_trace, train_profile, write_rank_memory_traces

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("memory_views")
    out = {"b8": d / "b8.json", "b16": d / "b16.json"}
    train_profile(out["b8"], 8)
    train_profile(out["b16"], 16)
    return out


def uploaded(upload: Uploader, path: Path) -> str:
    run: dict[str, Any] = upload(files=[(path.name, path.read_bytes())])
    assert run["status"] == "ready", run
    return str(run["id"])


def test_ops_page_and_twin_show_the_memory_columns(client: TestClient, upload: Uploader,
                                                   profiles: dict[str, Path]) -> None:
    rid = uploaded(upload, profiles["b8"])
    html = client.get(f"/runs/{rid}/ops?sort=-self_allocated_bytes").text
    for col in ("allocated_bytes", "self_allocated_bytes", "allocations", "self_net_bytes", "self_peak_bytes"):
        assert f'data-col="{col}"' in html
    twin = client.get(f"/api/runs/{rid}/ops?sort=-self_allocated_bytes").json()
    assert twin["memory"]["device"] == "CPU"
    got = [r["self_allocated_bytes"] for r in twin["rows"]]
    assert got == sorted(got, reverse=True) and got[0] > 0
    # grouped by module and in a time range too (explorer/views/op_memory.py); a device the run lacks is a 400
    for query in ("by_module=1", "start_ns=0&end_ns=1000000000"):
        part = client.get(f"/api/runs/{rid}/ops?sort=-self_allocated_bytes&{query}").json()
        got = [r["self_allocated_bytes"] for r in part["rows"]]
        assert got == sorted(got, reverse=True) and got[0] > 0 and part["memory"]["device"] == "CPU"
    bad = client.get(f"/api/runs/{rid}/ops?memory_device=CUDA%207")
    assert_error(bad, 400, "bad_request")
    assert "CUDA 7" in bad.text and "CPU" in bad.text
    assert 'id="memory-device"' not in html  # one device: no selector


def test_ops_page_offers_the_memory_devices(client: TestClient, upload: Uploader, tmp_path: Path) -> None:
    """A run with [memory] events on several devices (a constructed two-rank trace): the page's selector lists
    them, and `memory_device=` chooses the columns' device on the page and its twin alike."""
    files = write_rank_memory_traces(tmp_path)
    run: dict[str, Any] = upload(files=[(p.name, p.read_bytes()) for p in files])
    assert run["status"] == "ready", run
    rid = run["id"]
    html = client.get(f"/runs/{rid}/ops?rank=1").text
    assert 'id="memory-device"' in html and '<option value="CPU">CPU</option>' in html
    html = client.get(f"/runs/{rid}/ops?rank=1&memory_device=CPU").text
    assert '<option value="CPU" selected>' in html and "memory_device=CPU" in html  # (the twin link keeps it)
    twin = client.get(f"/api/runs/{rid}/ops?rank=1&memory_device=CPU").json()
    assert twin["memory"]["device"] == "CPU" and twin["memory"]["peak_bytes"] == 2000 + 4096


def test_compare_shows_memory_by_owner(client: TestClient, upload: Uploader, profiles: dict[str, Path]) -> None:
    """Batch 16 against batch 8: the peak's Δ is the two files' maximum Total Allocated apart, and the Δ by owner op
    and by module each sum to it (the tables hold what no op explains, and the rest in one row)."""
    b8, b16 = uploaded(upload, profiles["b8"]), uploaded(upload, profiles["b16"])
    data = client.get(f"/api/compare?runs={b8},{b16}").json()
    [m] = data["memory"]
    assert (m["baseline_id"], m["run_id"]) == (b8, b16)
    [p] = m["peaks"]
    peaks = {k: max(e["args"]["Total Allocated"] for e in read_trace(profiles[k])[0]) for k in ("b8", "b16")}
    assert (p["device"], p["bytes"], p["baseline_bytes"]) == ("CPU", peaks["b16"], peaks["b8"])
    assert p["delta"] == peaks["b16"] - peaks["b8"] > 0
    for rows in (p["by_owner"], p["by_module"]):
        assert sum(r["delta"] for r in rows) == p["delta"]
        assert sum(r["bytes"] for r in rows) == p["bytes"] and sum(r["baseline_bytes"] for r in rows) == p["baseline_bytes"]
    owners = {r["owner"]: r for r in p["by_owner"]}
    assert owners["aten::clamp_min"]["bytes"] == 2 * owners["aten::clamp_min"]["baseline_bytes"] > 0  # ReLU outputs
    html = client.get(f"/compare?runs={b8},{b16}").text
    assert 'id="tab-memory"' in html and 'data-what="owner op"' in html and "aten::clamp_min" in html
    assert 'id="headline-memory"' in html


def test_compare_without_memory_events_has_no_memory(client: TestClient, upload: Uploader,
                                                     profiles: dict[str, Path]) -> None:
    tiny = upload()["id"]
    b8 = uploaded(upload, profiles["b8"])
    assert "memory" not in client.get(f"/api/compare?runs={tiny},{b8}").json()
    assert 'id="tab-memory"' not in client.get(f"/compare?runs={tiny},{b8}").text


def test_memory_at_refuses_a_track_that_is_not_a_memory_counter(client: TestClient, upload: Uploader,
                                                                  profiles: dict[str, Path]) -> None:
    rid = uploaded(upload, profiles["b8"])
    tracks = client.get(f"/api/runs/{rid}/tracks").json()["tracks"]
    other = next(t for t in tracks if not t["label"].startswith("memory "))
    assert_error(client.get(f"/api/runs/{rid}/memory/at?track={other['track_id']}&at_ns=0"), 400, "bad_request")
    mem = next(t for t in tracks if t["label"] == "memory allocated (CPU) [bytes]")
    assert client.get(f"/api/runs/{rid}/memory/at?track={mem['track_id']}&at_ns=-1").json()["event"] is None
    assert client.get(f"/api/runs/{rid}/memory/at?track={mem['track_id']}&at_ns={2**70}").status_code == 422


def test_memory_page_shows_on_chip_memory(client: TestClient) -> None:
    """A Neuron export (tests/fixtures/neuron/device_export) has no [memory] events: the memory page shows its
    device profiles' SBUF peak and SBUF/PSUM utilisation instead of 'No memory events'."""
    from explorer.runs.ingest import ingest_paths

    export = Path(__file__).resolve().parents[1] / "fixtures" / "neuron" / "device_export"
    rid = ingest_paths(client.app.state.explorer.store, [export], "device").id  # type: ignore[attr-defined]
    twin = client.get(f"/api/runs/{rid}/memory").json()
    assert twin["report"] is None and len(twin["onchip"]) == 2
    html = client.get(f"/runs/{rid}/memory").text
    assert 'id="onchip"' in html and 'id="memory-empty"' not in html
    for o in twin["onchip"]:
        assert f'data-profile="{o["profile_id"]}"' in html and f"/device/{o['profile_id']}" in html


def test_memory_at_any_track_id(client: TestClient, upload: Uploader) -> None:
    rid = upload()["id"]
    for track in (0, 2**31 - 1):
        assert_error(client.get(f"/api/runs/{rid}/memory/at?track={track}&at_ns=0"), 400, "bad_request")
    assert client.get(f"/api/runs/{rid}/memory/at?track={2**31}&at_ns=0").status_code == 422
