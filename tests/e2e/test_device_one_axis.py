"""Issue 41 in a browser (1600x1000): host and device on one axis — the device export with its host clock moved
(tests/helpers/neuron_shifted.py): the alignment legend under the toolbar, the note on each device group's header,
the device engines and DMA queues under the host lanes at their shifted times, the host CPU and memory counters in
the same view; and a traced dependency chain drawn on the timeline from the chain page's "Show on timeline"."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_device_chain import write_profile
from tests.helpers.neuron_shifted import expected_placement, write_shifted_export

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs(server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from explorer.runs.ingest import ingest_paths

    tmp = tmp_path_factory.mktemp("one_axis_ui")
    export = write_shifted_export(tmp)
    store = server.state.store
    return {"export": export, "axis": str(ingest_paths(store, [export], "neuron export, host clock 4.3 us early").id),
            "chain": str(ingest_paths(store, [write_profile(tmp)], "dependency chain (timeline)").id)}


def test_device_tracks_under_the_host_lanes_with_their_alignment(page: Any, server: Any, runs: dict[str, Any],
                                                                 shot: Any) -> None:
    run = runs["axis"]
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run}/timeline")
    page.wait_for_selector("#tl-device-align .tl-note-row")
    legend = page.inner_text("#tl-device-align")
    assert "best-effort" in legend and "no clock-sync data" in legend
    rows = {r.get_attribute("data-profile"): r.inner_text() for r in page.locator("#tl-device-align .tl-note-row").all()}
    assert set(rows) == {"matmul", "rmsnorm_naive"}
    matmul = expected_placement(runs["export"], "matmul")
    assert matmul["shift"] == -4021
    assert "shifted −4.02" in rows["matmul"] and "uncertain by 1" in rows["matmul"]  # 1,000 ns of slack
    assert "uncertain by 0" in rows["rmsnorm_naive"]
    axis = page.evaluate("() => TE.timelineApi.deviceAxis()")
    assert {p["profile_id"]: p["alignment"]["shift_ns"] for p in axis["profiles"]} == {"matmul": -4021, "rmsnorm_naive": -4321}
    link = next(p for p in axis["profiles"] if p["profile_id"] == "matmul")
    page.goto(f"{server.url}/runs/{run}/timeline?sel={link['system_slice_id']}")
    page.wait_for_selector("#tl-open-device")
    page.click("#tl-open-device")
    page.wait_for_function("() => TE.timelineApi.rows().some((r) => r.kind === 'track' && r.lane === 'hardware' && r.key === undefined && r.trackKind === 'slice' && r.trackId > 11)")
    page.wait_for_timeout(500)
    view = page.evaluate("() => TE.timelineApi.view()")
    assert view["start"] < link["start_ns"] and link["end_ns"] < view["end"]  # zoomed to its span on the host axis
    layout = page.evaluate("() => TE.timelineApi.rows()")
    heads = [r for r in layout if r["kind"] == "header"]
    keys = [h["key"] for h in heads]
    assert keys.index("hardware") < keys.index("matmul · NC:0 · engines") < keys.index("counter")
    lanes = [r["lane"] for r in layout if r["kind"] == "track"]
    assert "runtime" in lanes and "hardware" in lanes and "counter" in lanes  # host lanes, device rows, host counters
    counters = page.evaluate("() => TE.timelineApi.source.tracks()")
    labels = [t["label"] for t in counters["tracks"] if t["lane"] == "counter"]
    assert any(x.startswith("CPU") for x in labels) and any(x.startswith("host memory") for x in labels)
    detail = page.inner_text("#tl-device-alignment")
    assert "sticks out of this execution by 4.02" in detail and "shifted −4.02" in detail
    page.evaluate("() => TE.timelineApi.scrollTo(0)")
    shot(page, "issue41-06-one-axis-aligned", full_page=False)
    page.evaluate("() => TE.timelineApi.scrollTo(100000)")  # the host counters under the device rows
    shot(page, "issue41-06b-one-axis-host-counters", full_page=False)


def test_show_a_traced_chain_on_the_timeline(page: Any, server: Any, runs: dict[str, Any], shot: Any) -> None:
    run = runs["chain"]
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run}/device/chain/chain?node=Instruction:30&mode=trace")
    page.click("#chain-timeline")
    page.wait_for_selector("#tl-dchain-root")
    assert "ACTIVATE" in page.inner_text("#tl-dchain-root") and "scalar" in page.inner_text("#tl-dchain-root")
    assert "2 steps" in page.inner_text("#tl-dchain") and "6.5" in page.inner_text("#tl-dchain")
    page.wait_for_function("() => TE.timelineApi.deviceAxis().drawn.length === 3")
    axis = page.evaluate("() => TE.timelineApi.deviceAxis()")
    assert [(i["table"], i["id"]) for i in axis["chain"]["items"]] == [("Instruction", 10), ("DmaPacket", 20),
                                                                        ("Instruction", 30)]
    drawn = sorted(axis["drawn"], key=lambda d: d["index"])
    assert [d["root"] for d in drawn] == [True, False, False]
    assert drawn[0]["x"] < drawn[1]["x"]  # the root ran before the transfer that waited on it
    assert "dchain_node=Instruction%3A30" in page.url or "dchain_node=Instruction:30" in page.url
    shot(page, "issue41-07-chain-on-timeline", full_page=False)
    page.click("#tl-dchain button")
    page.wait_for_function("() => TE.timelineApi.deviceAxis().drawn.length === 0")
    assert "dchain_node" not in page.url


def test_draw_a_chain_from_a_selected_instruction(page: Any, server: Any, runs: dict[str, Any]) -> None:
    """A device instruction's details offer "draw on timeline": its chain traced to the root cause, drawn in place
    and kept in the URL."""
    run = runs["chain"]
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run}/timeline")
    page.wait_for_selector("#tl-device-align .tl-note-row")
    first = server.state.store.table(run, "slices").num_rows
    events = [page.evaluate(f"() => fetch('/api/runs/{run}/events/{first + k}').then((r) => r.json())") for k in range(9)]
    vector = next(e["event"]["slice_id"] for e in events if e.get("event", {}).get("args", {}).get("id") == 30
                  and e["event"]["cat"] == "Instruction")
    page.evaluate(f"() => TE.timelineApi.select({vector})")
    page.wait_for_selector("#tl-draw-chain")
    page.click("#tl-draw-chain")
    page.wait_for_selector("#tl-dchain-root")
    assert "ACTIVATE" in page.inner_text("#tl-dchain-root")
    page.wait_for_function("() => location.search.includes('dchain_node=Instruction')")


def test_the_offline_report_shows_the_device_on_the_host_axis(offline_page: Any, server: Any, runs: dict[str, Any],
                                                              tmp_path: Any, shot: Any) -> None:
    """The report file, opened with the network off: the same alignment legend (no server to ask) and the device
    engines under the host lanes, at the shifts the export gives."""
    from tests.e2e.test_report_and_xss import write_report

    page = offline_page
    page.set_viewport_size({"width": 1600, "height": 1000})
    report = write_report(server, runs["axis"], tmp_path / "axis-report.html")
    page.goto(report.as_uri())
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_selector("#tl-device-align .tl-note-row")
    legend = page.inner_text("#tl-device-align")
    assert "best-effort" in legend and "no clock-sync data" in legend
    rows = {r.get_attribute("data-profile"): r.inner_text() for r in page.locator("#tl-device-align .tl-note-row").all()}
    assert set(rows) == {"matmul", "rmsnorm_naive"}
    assert "shifted −4.02" in rows["matmul"] and "uncertain by 1" in rows["matmul"]
    axis = page.evaluate("() => TE.timelineApi.deviceAxis()")
    assert {p["profile_id"]: p["alignment"]["shift_ns"] for p in axis["profiles"]} == {
        name: expected_placement(runs["export"], name)["shift"] for name in ("matmul", "rmsnorm_naive")}
    heads = [r["key"] for r in page.evaluate("() => TE.timelineApi.rows()") if r["kind"] == "header"]
    assert any(str(k).startswith("matmul · NC:0") for k in heads)
    page.locator("#tl-device-align").scroll_into_view_if_needed()
    shot(page, "issue41-08-report-one-axis", full_page=False)
    assert page.guard.external == []
