"""End-to-end: a real torch trace uploaded through the runs page, then every page in headless Chromium.

Waits are on explicit conditions (data-ready attributes, text, URL), never sleeps. Each test fails on
a request to another host, a dialog or a page error (see conftest.guard_page).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.support import shift_drag

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def wait_timeline(page: Any) -> None:
    page.wait_for_selector("#timeline[data-ready='1']")


def span_of(page: Any) -> float:
    return float(page.evaluate("() => TE.timelineApi.view().span"))


def slice_point(page: Any, name: str | None = None, lane: str | None = None) -> dict[str, Any]:
    """Page coordinates of the centre of the widest visible slice (optionally by name / lane)."""
    return page.evaluate(  # type: ignore[no-any-return]
        """([want, lane]) => {
          let best = null;
          for (const s of TE.timelineApi.visibleSlices()) {
            if ((want && s.name !== want) || (lane && s.lane !== lane)) continue;
            if (!best || s.w > best.w) best = {x: s.x, y: s.y, w: s.w, id: s.id, name: s.name};
          }
          return best;
        }""", [name, lane])


def test_upload_torch_trace_then_explore(page: Any, server: Any, traces: Any, shot: Any) -> None:
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-init='1']")
    shot(page, "01-runs-empty-upload")
    page.set_input_files("#file-input", str(traces.naive))
    page.wait_for_selector("#uploads .status.ready", timeout=60000)
    page.wait_for_selector("#runs-table tr:has-text('rmsnorm_naive')")  # the table refreshes after ready
    row = page.locator("#runs-table tr", has_text="rmsnorm_naive")
    assert row.count() == 1
    assert "READY" in row.inner_text().upper()
    shot(page, "02-runs-after-upload")
    page.locator("#uploads a.open-run").click()
    page.wait_for_url(re.compile(r"/runs/r[0-9a-f]+$"))
    run_id = page.url.rsplit("/", 1)[1]
    page.wait_for_selector("#fig-top-cpu .main-svg")
    assert "aten::mul" in page.inner_text("#fig-top-cpu")
    shot(page, "03-overview-uploaded", full_page=True)

    # timeline: zoom (wheel, W), pan (drag, D), click a slice, search
    page.click("#tab-timeline")
    wait_timeline(page)
    full = span_of(page)
    canvas = page.locator("#tl-canvas").bounding_box()
    cx, cy = canvas["x"] + canvas["width"] * 0.55, canvas["y"] + 60
    page.mouse.move(cx, cy)
    page.mouse.wheel(0, -400)
    page.wait_for_function(f"() => TE.timelineApi.view().span < {full * 0.6}")
    page.keyboard.press("w")
    zoomed = span_of(page)
    assert zoomed < full * 0.5
    start_before = page.evaluate("() => TE.timelineApi.view().start")
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx - 200, cy, steps=5)
    page.mouse.up()
    assert page.evaluate("() => TE.timelineApi.view().start") > start_before
    page.keyboard.press("d")
    page.wait_for_function("() => TE.timelineApi.idle()")
    page.keyboard.press("s")
    assert span_of(page) > zoomed
    page.click("#tl-reset")
    wait_for_refetch(page)

    # search jumps to each match in turn (selects it, zooms to it)
    page.fill("#tl-search", "aten::rsqrt")
    page.press("#tl-search", "Enter")
    page.wait_for_function("() => /^1 \\/ \\d+$/.test(document.getElementById('tl-matches')?.textContent)")
    page.wait_for_function("() => document.getElementById('tl-detail-name')?.textContent === 'aten::rsqrt'")
    page.press("#tl-search", "Enter")
    page.wait_for_function("() => document.getElementById('tl-matches')?.textContent.startsWith('2 / ')")
    page.wait_for_url(re.compile(r"q=aten%3A%3Arsqrt"))
    page.wait_for_url(re.compile(r"sel=\d+"))
    shot(page, "05-timeline-search")
    # a regular expression matches more than the literal text would (none of these names contain "|")
    page.fill("#tl-search", "aten::(rsqrt|mean)$")
    page.press("#tl-search", "Enter")
    page.wait_for_function("() => document.getElementById('tl-matches')?.textContent === 'no matches'")
    page.check("#tl-regex")
    page.wait_for_function("() => TE.timelineApi.matches().length > 0 && TE.timelineApi.matches().every("
                           "m => m.name === 'aten::rsqrt' || m.name === 'aten::mean')")
    assert {m for m in page.evaluate("() => TE.timelineApi.matches().map(m => m.name)")} == {"aten::rsqrt", "aten::mean"}
    page.uncheck("#tl-regex")
    page.fill("#tl-search", "aten::rsqrt")
    page.press("#tl-search", "Enter")
    page.wait_for_function("() => document.getElementById('tl-matches')?.textContent.startsWith('1 / ')")
    page.press("#tl-search", "Enter")
    page.wait_for_function("() => document.getElementById('tl-matches')?.textContent.startsWith('2 / ')")
    # the jump's select() fetches the event, then moves the view: wait until the second match is selected
    page.wait_for_function("() => { const m = TE.timelineApi.matches(), sel = TE.timelineApi.selection();"
                           " return m.length > 1 && !!sel && sel.event.slice_id === m[1].slice_id; }")

    # click a slice: its details panel (from the whole-run view: right after a jump the zoomed window can
    # still be drawn from the wide window's merged bins on a loaded machine)
    page.click("#tl-reset")
    wait_for_refetch(page)
    # the framework rows' own slices have landed and been drawn
    page.wait_for_function("() => TE.timelineApi.visibleSlices().some(s => s.lane === 'framework')", timeout=30000)
    target = slice_point(page, "aten::mul") or slice_point(page, lane="framework")
    assert target, "no slice visible"
    page.mouse.click(target["x"], target["y"])
    page.wait_for_function(f"() => TE.timelineApi.selection()?.event.slice_id === {target['id']}")
    assert page.inner_text("#tl-detail-name") == target["name"]
    details = page.inner_text("#tl-details")
    assert "duration" in details and "Parents" in details or "Args" in details
    shot(page, "04-timeline-details")

    # the URL reopens the same view
    sel = page.evaluate("() => TE.timelineApi.selection().event.slice_id")
    page.wait_for_url(re.compile(rf"sel={sel}(&|$)"))
    url, win = page.url, page.evaluate("() => [TE.timelineApi.view().start, TE.timelineApi.view().end]")
    page.goto(url)
    wait_timeline(page)
    page.wait_for_selector("#tl-details.open")
    assert page.evaluate("() => TE.timelineApi.selection().event.slice_id") == sel
    again = page.evaluate("() => [TE.timelineApi.view().start, TE.timelineApi.view().end]")
    assert abs(again[0] - win[0]) <= 1 and abs(again[1] - win[1]) <= 1
    assert page.input_value("#tl-search") == "aten::rsqrt"
    page.wait_for_function("() => TE.timelineApi.matches().length > 1")

    # op table: sort by every column through the header links, filter, group by shape
    page.goto(f"{server.url}/runs/{run_id}/ops")
    page.wait_for_selector("#fig-ops .main-svg")
    page.click("#ops-table th[data-col='cpu_total_ns'] a")
    page.wait_for_url(re.compile(r"sort=-cpu_total_ns"))
    cpu = [int(v) for v in page.eval_on_selector_all(
        "#ops-table tbody td:nth-child(3)", "tds => tds.map(td => td.dataset.v)")]
    assert cpu == sorted(cpu, reverse=True) and len(cpu) > 3
    page.click("#ops-table th[data-col='name'] a")
    page.wait_for_url(re.compile(r"sort=%2Bname"))
    names = page.eval_on_selector_all("#ops-table tbody td.name", "tds => tds.map(td => td.textContent)")
    assert names == sorted(names)
    page.click("#ops-table th[data-col='name'] a")
    page.wait_for_url(re.compile(r"sort=-name"))
    names = page.eval_on_selector_all("#ops-table tbody td.name", "tds => tds.map(td => td.textContent)")
    assert names == sorted(names, reverse=True)
    assert page.get_attribute("#json-twin", "href").endswith(f"/api/runs/{run_id}/ops?sort=-name")
    page.fill("#ops-q", "mul")
    page.press("#ops-q", "Enter")
    page.wait_for_url(re.compile(r"q=mul"))
    assert set(page.eval_on_selector_all("#ops-table tbody td.name", "tds => tds.map(td => td.textContent)")) == {
        "aten::mul"}
    page.fill("#ops-q", "")
    page.check("#by-shape")
    page.wait_for_url(re.compile(r"by_shape=1"))
    assert "[64, 512]" in page.inner_text("#ops-table")
    shot(page, "06-ops-by-shape", full_page=True)

    # compare the uploaded (naive) run against the fused one
    page.goto(server.url + "/")
    page.check(f"input.pick-run[value='{run_id}']")
    page.check(f"input.pick-run[value='{server.runs['fused']}']")
    page.click("#compare-btn")
    page.wait_for_url(re.compile(r"/compare\?runs="))
    page.wait_for_selector("#fig-compare .main-svg")
    headline = page.inner_text("#headline")
    assert "→" in headline and "%" in headline
    assert page.locator("#compare-table tbody tr", has_text="aten::rsqrt").count() == 1
    shot(page, "07-compare", full_page=True)


def wait_for_refetch(page: Any) -> None:
    """The window is covered by fetched data and drawn: on a loaded machine a frame can lag the fetch, and
    the visible-slice list is that of the last frame drawn."""
    page.wait_for_function("() => TE.timelineApi.covered() && TE.timelineApi.idle()"
                           " && TE.timelineApi.visibleSlices().length > 0", timeout=30000)


def test_runs_rename_tag_delete(page: Any, server: Any, traces: Any, tmp_path: Path) -> None:
    from explorer.runs.ingest import ingest_paths

    trace = tmp_path / "extra.json"
    trace.write_text(traces.hostile.read_text().replace("aten::mul", "aten::extra"))
    rid = ingest_paths(server.state.store, [trace], "to-edit").id
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-init='1']")
    row = f"#runs-table tr[data-run='{rid}']"
    page.hover(row)
    page.click(f"{row} button[data-act='rename']")
    page.fill(f"{row} input.edit-rename", "renamed run")
    page.press(f"{row} input.edit-rename", "Enter")
    page.wait_for_selector(f"{row}[data-name='renamed run']")
    page.hover(row)
    page.click(f"{row} button[data-act='tag']")
    page.fill(f"{row} input.edit-tag", "baseline, cpu")
    page.press(f"{row} input.edit-tag", "Enter")
    page.wait_for_function(f"() => document.querySelector(\"{row} .run-tags\").textContent.includes('baseline')")
    assert server.state.store.get(rid).tags == ["baseline", "cpu"]
    page.hover(row)
    page.click(f"{row} button[data-act='delete']")
    page.click(f"{row} button[data-act='delete']")  # second click confirms
    page.wait_for_selector(row, state="detached")
    assert server.state.store.catalog.list(name="renamed")[1] == 0


def test_timeline_linked_chain_and_range(page: Any, server: Any, shot: Any) -> None:
    rid = server.runs["synth"]
    page.goto(f"{server.url}/runs/{rid}")
    page.wait_for_selector("#fig-lanes .main-svg")
    page.wait_for_selector("#fig-top-device .main-svg")
    assert "hardware" in page.inner_text("#cards").lower() and page.locator("#gaps tbody tr").count() > 0
    shot(page, "03b-overview-three-lanes", full_page=True)
    # a device gap's link opens the timeline on that gap
    href = page.get_attribute("#gaps tbody tr:first-child a", "href")
    page.click("#gaps tbody tr:first-child a")
    wait_timeline(page)
    want = [float(v) for v in re.findall(r"[?&](?:start|end)=(-?\d+)", href)]  # the window, not hl_start/hl_end
    assert page.evaluate("() => [TE.timelineApi.view().start, TE.timelineApi.view().end]") == pytest.approx(want, abs=1)
    page.goto(f"{server.url}/runs/{rid}/timeline")
    wait_timeline(page)
    for _ in range(4):
        page.keyboard.press("w")
    wait_for_refetch(page)
    target = slice_point(page, lane="hardware")
    page.mouse.click(target["x"], target["y"])
    page.wait_for_selector("#tl-chain")
    chain = page.inner_text("#tl-chain")
    assert "launch" in chain or "execute" in chain
    assert "gap" in chain
    lanes = page.evaluate("() => TE.timelineApi.selection().chain.map(c => c.lane)")
    assert {"framework", "runtime", "hardware"} <= set(lanes)
    shot(page, "08-timeline-chain")

    # hovering a counter track tells its value there
    box = page.locator("#tl-canvas").bounding_box()
    row_y = page.evaluate("() => { const r = TE.timelineApi.rows().find(r => r.kind === 'track' && "
                          "r.trackKind === 'counter'); return r.top + r.h / 2; }")
    page.mouse.move(box["x"] + 700, box["y"] + row_y)
    page.wait_for_function("() => document.getElementById('tl-tip').style.display === 'block'")
    assert re.match(r"memory: \d", page.inner_text("#tl-tip")), page.inner_text("#tl-tip")

    y = box["y"] + 200
    shift_drag(page, y, box["x"] + 400, box["x"] + 900)
    page.wait_for_selector("#tl-range-ops tbody tr")
    assert page.inner_text("#tl-range-dur").startswith("Range ")
    assert "aten::" in page.inner_text("#tl-range-ops")
    shot(page, "09-timeline-range")

    page.select_option("#tl-group", "thread")
    page.wait_for_url(re.compile(r"group=thread"))
    assert page.evaluate("() => TE.timelineApi.rows().filter(r => r.kind === 'header').length") >= 2
    shot(page, "09b-timeline-group-thread")
    page.select_option("#tl-group", "lane")
    header = page.evaluate("() => TE.timelineApi.rows().find(r => r.kind === 'header' && r.key === 'runtime').top")
    before = page.evaluate("() => TE.timelineApi.rows().length")
    page.mouse.click(box["x"] + 60, box["y"] + header + 10)
    page.wait_for_function(f"() => TE.timelineApi.rows().length < {before}")


DROP_JS = """([b64, name]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name));
  const drop = document.getElementById("drop");
  drop.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true, cancelable: true}));
  drop.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
}"""


def test_drop_gzip_then_same_again_is_a_duplicate(page: Any, server: Any, traces: Any, shot: Any) -> None:
    import base64
    import gzip

    raw = traces.hostile.read_text().replace("aten::mul", "aten::dropped")
    payload = base64.b64encode(gzip.compress(raw.encode())).decode()
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-init='1']")
    page.evaluate(DROP_JS, [payload, "dropped_trace.json.gz"])
    page.wait_for_selector("#uploads .upload:nth-child(1) .status.ready", timeout=60000)
    page.wait_for_selector("#runs-table tr:has-text('dropped_trace')")
    page.evaluate(DROP_JS, [payload, "dropped_again.json.gz"])
    page.wait_for_function("() => document.querySelector('#uploads .upload')?.textContent.includes('already uploaded')")
    shot(page, "14-runs-drop-duplicate")


def test_upload_a_folder_as_one_run(page: Any, server: Any, traces: Any, tmp_path: Path) -> None:
    folder = tmp_path / "capture"
    for rank in (0, 1):
        (folder / f"rank{rank}").mkdir(parents=True)
        text = traces.hostile.read_text().replace("aten::mul", f"aten::folder_rank{rank}")
        (folder / f"rank{rank}" / "trace.json").write_text(text)
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-init='1']")
    page.set_input_files("#folder-input", str(folder))
    page.wait_for_selector("#uploads .upload:nth-child(1) .status.ready", timeout=60000)
    assert "2 files" in page.inner_text("#uploads .upload:nth-child(1)")
    run_id = page.get_attribute("#uploads .upload:nth-child(1)", "data-run")
    run = server.state.store.get(run_id)
    assert run.summary.slices == 2 * 12 and len(run.summary.artifacts) == 2
