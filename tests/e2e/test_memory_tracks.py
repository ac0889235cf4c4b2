"""End-to-end: memory beyond the memory page, in a browser, on real torch.profiler(profile_memory=True) captures.
The timeline's memory counter track, hovered just after the peak, names the owner op of the allocation in force
there (read from the file: the innermost op on its thread that is not an allocation primitive); the ops page shows
the memory columns once its table goes live; the compare page's Memory tab shows the change by owner."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.analysis.memory import ALLOCATION_PRIMITIVES
from explorer.runs.ingest import ingest_paths
from tests.helpers.memory_profiles import write_rank_memory_traces

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
PROFILE = ("from pathlib import Path; import sys; from tests.helpers.memory_profiles import train_profile; "
           "train_profile(Path(sys.argv[1]), int(sys.argv[2]))")


def profiled(path: Path, batch: int) -> Path:
    proc = subprocess.run([sys.executable, "-c", PROFILE, str(path), str(batch)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return path


@pytest.fixture(scope="module")
def runs(server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("memory-tracks")
    paths = {"b8": profiled(d / "b8.json", 8), "b16": profiled(d / "b16.json", 16)}
    ids = {k: ingest_paths(server.state.store, [p], f"mlp {k}").id for k, p in paths.items()}
    return {"paths": paths, "ids": ids}


def peak_and_owner(path: Path) -> tuple[int, int, str, int]:
    """From the file: (peak event's time, the next event's time, both absolute ns; the peak allocation's owner op;
    its bytes), the owner being the innermost cpu_op holding it on its thread that is not an allocation primitive."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    base = int(doc.get("baseTimeNanoseconds", 0))
    events = doc["traceEvents"]
    mem = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: Decimal(e["ts"]))
    totals = [e["args"]["Total Allocated"] for e in mem]
    k = totals.index(max(totals))
    e = mem[k]
    t = Decimal(e["ts"])
    held = sorted((x for x in events if x.get("ph") == "X" and x.get("cat") == "cpu_op" and x["tid"] == e["tid"]
                   and Decimal(x["ts"]) <= t < Decimal(x["ts"]) + Decimal(x["dur"])),
                  key=lambda x: (Decimal(x["ts"]), -Decimal(x["dur"])))
    owner = [x["name"] for x in held if x["name"] not in ALLOCATION_PRIMITIVES][-1]
    later = next(m for m in mem[k + 1:] if Decimal(m["ts"]) > t)
    return base + int(t * 1000), base + int(Decimal(later["ts"]) * 1000), owner, e["args"]["Bytes"]


def test_memory_track_hover_names_the_owner(page: Any, server: Any, runs: dict[str, Any], shot: Any) -> None:
    run_id = runs["ids"]["b8"]
    start_ns = server.state.store.require_ready(run_id).summary.start_ns
    t0, t1, owner, nbytes = peak_and_owner(runs["paths"]["b8"])
    a, b = t0 - start_ns, t1 - start_ns
    gap = b - a
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run_id}/timeline?start={a - gap}&end={b + gap}")
    page.wait_for_selector("#timeline[data-ready='1']")
    tracks = page.request.get(f"{server.url}/api/runs/{run_id}/tracks").json()["tracks"]
    track = next(t for t in tracks if t["label"] == "memory allocated (CPU) [bytes]")
    api = "TE.timelineApi"
    page.wait_for_function(f"(id) => {api}.rows().some((r) => r.trackId === id)", arg=track["track_id"])
    row = next(r for r in page.evaluate(f"() => {api}.rows()") if r["trackId"] == track["track_id"])
    page.evaluate(f"(y) => {api}.scrollTo(y)", max(0, row["top"] - page.evaluate(f"() => {api}.bodyTop()") - 60))
    row = next(r for r in page.evaluate(f"() => {api}.rows()") if r["trackId"] == track["track_id"])
    v, plot_w, gutter = page.evaluate(f"() => [{api}.view(), {api}.plotWidth(), {api}.gutter]")
    x = gutter + ((a + b) / 2 - v["start"]) / v["span"] * plot_w
    box = page.locator("#tl-canvas").bounding_box()
    page.mouse.move(box["x"] + x, box["y"] + row["top"] + row["h"] / 2)
    page.wait_for_function(f"() => ({api}.tooltip() || '').includes('owner op:')")
    tip = page.evaluate(f"() => {api}.tooltip()")
    assert f"allocated {page.evaluate('(n) => TE.fmtBytes(n)', nbytes)} by {owner}" in tip
    assert f"owner op: {owner}" in tip
    shot(page, "memory-track-hover")
    answer = page.request.get(f"{server.url}/api/runs/{run_id}/memory/at?track={track['track_id']}&at_ns={a}").json()
    assert (answer["event"]["ts_ns"], answer["event"]["owner"], answer["next_ts_ns"]) == (a, owner, b)


def test_ops_page_memory_columns_live(page: Any, server: Any, runs: dict[str, Any], shot: Any) -> None:
    run_id = runs["ids"]["b8"]
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run_id}/ops?sort=-self_allocated_bytes")
    page.wait_for_selector("#ops-table[data-live='1']")
    head = page.locator("#ops-table th[data-col='self_allocated_bytes']")
    assert "Self alloc" in head.inner_text()
    first = page.locator("#ops-table tbody tr").first.inner_text()
    twin = page.request.get(f"{server.url}/api/runs/{run_id}/ops?sort=-self_allocated_bytes").json()
    assert twin["rows"][0]["name"] in first and "MiB" in first
    page.locator("#ops-table th[data-col='self_peak_bytes'] a").click()  # sorted in the browser from here on
    cells = page.evaluate("""() => {
      const col = Array.from(document.querySelectorAll('#ops-table thead th')).findIndex((th) => th.dataset.col === 'self_peak_bytes');
      return Array.from(document.querySelectorAll('#ops-table tbody tr')).map((tr) => +tr.cells[col].dataset.v);
    }""")
    assert cells == sorted(cells, reverse=True) and cells[0] > 0
    shot(page, "ops-memory-columns")


def test_ops_page_memory_device_selector(page: Any, server: Any, tmp_path: Path, shot: Any) -> None:
    """A run of two ranks whose [memory] events are on two devices (constructed): rank 1's ops page offers both,
    shows the highest peak's (CUDA 0) first, and after choosing CPU the columns are CPU's (its file's bytes)."""
    run_id = ingest_paths(server.state.store, write_rank_memory_traces(tmp_path / "ranks"), "two devices").id
    page.set_viewport_size({"width": 1600, "height": 900})
    page.goto(f"{server.url}/runs/{run_id}/ops?rank=1&view=all")
    assert page.locator("#memory-device option").all_inner_texts() == ["highest peak (CUDA 0)", "CPU", "CUDA 0"]
    page.select_option("#memory-device", "CPU")
    page.locator("#ops-form button[type='submit']").click()
    page.wait_for_url("**memory_device=CPU**")
    page.wait_for_selector("#ops-table[data-live='1']")
    assert "CPU" in (page.locator("#ops-table th[data-col='self_peak_bytes']").get_attribute("title") or "")
    got = page.evaluate("""() => {
      const col = Array.from(document.querySelectorAll('#ops-table thead th')).findIndex((th) => th.dataset.col === 'self_allocated_bytes');
      const rows = Array.from(document.querySelectorAll('#ops-table tbody tr'));
      return Object.fromEntries(rows.map((tr) => [tr.cells[0].innerText.trim(), +tr.cells[col].dataset.v]));
    }""")
    assert got["aten::relu"] == 4096 and got["aten::addmm"] == 2000  # rank 1's CPU allocations (its file)
    assert "4.0 KiB" in page.locator("#ops-table tbody tr", has_text="aten::relu").inner_text()
    shot(page, "ops-memory-device")


def test_compare_memory_tab(page: Any, server: Any, runs: dict[str, Any], shot: Any) -> None:
    b8, b16 = runs["ids"]["b8"], runs["ids"]["b16"]
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/compare?runs={b8},{b16}")
    page.wait_for_selector("body[data-init='1']")
    page.click("#memory-tab-btn")
    panel = page.locator(".memory-compare").first
    assert panel.is_visible() and "aten::clamp_min" in panel.inner_text()
    deltas = panel.locator("table[data-what='owner op'] tbody td.delta").evaluate_all(
        "(tds) => tds.map((td) => +td.dataset.v)")
    data = page.request.get(f"{server.url}/api/compare?runs={b8},{b16}").json()
    assert sum(deltas) == data["memory"][0]["peaks"][0]["delta"] > 0
    shot(page, "compare-memory-tab")


def test_memory_page_on_chip_memory(page: Any, server: Any, shot: Any) -> None:
    """The Neuron export fixture: the memory page's on-chip table, each profile linked to its device page."""
    export = ROOT / "tests" / "fixtures" / "neuron" / "device_export"
    run_id = ingest_paths(server.state.store, [export], "neuron device export").id
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run_id}/memory")
    page.wait_for_selector("body[data-init='1']")
    rows = page.locator("#onchip .onchip-row")
    assert rows.count() == 2 and "KiB" in rows.first.locator(".sbuf-peak").inner_text()
    shot(page, "memory-onchip")
    rows.first.locator("a").click()
    page.wait_for_url("**/device/**")
