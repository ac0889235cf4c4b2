"""End-to-end: the timeline's lanes on one screen. A real `torch.profiler(with_stack=True)` capture of nested
nn.Modules (a framework lane dozens of levels deep) with a CUDA launch and a kernel added under each
`aten::addmm`, so the run has all three lanes; in a 1600x1000 viewport the three lanes fit, with the Python
stack opened (its band clicked: tests/e2e/test_python_fold.py has it folded) deep levels fold into a "+k levels" band, tracks pin, collapsed lanes keep a busy row, the minimap moves the window,
and a highlight range from the URL is drawn."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import guard_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DEEP_SCRIPT = r"""
import sys, torch
from torch import nn
from torch.profiler import profile, ProfilerActivity
torch.set_num_threads(1)
class Leaf(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(32, 32)
    def forward(self, x):
        return torch.relu(self.lin(x))
class Nest(nn.Module):
    def __init__(self, depth):
        super().__init__(); self.inner = Nest(depth - 1) if depth > 1 else Leaf()
    def forward(self, x):
        return self.inner(x) + 1
m, x = Nest(14), torch.randn(8, 32)
m(x)
with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
    for _ in range(3):
        m(x)
prof.export_chrome_trace(sys.argv[1])
"""
VIEW_W, VIEW_H = 1600, 1000
GUTTER, TE_ROW_H = 230, 17  # the timeline's label gutter and slice row height (timeline.js, tracks.js)
GPU_PID, STREAM = 0, 7
KERNEL_DELAY_US = Decimal("40.000")  # each kernel starts this long after its launch: a device queue


def add_device_events(path: Path) -> int:
    """Under each `aten::addmm` of the CPU capture: a `cudaLaunchKernel` (cuda_runtime, same thread, a third
    into the op) and its `kernel` on a device stream, linked by `correlation`. Returns how many were added."""
    trace = json.loads(path.read_text(), parse_float=Decimal)
    events = trace["traceEvents"]
    added: list[dict[str, Any]] = []
    for n, op in enumerate(e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm"):
        launch_ts = op["ts"] + (op["dur"] / 3).quantize(Decimal("0.001"))
        corr = 1_000_000 + n
        added.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": op["pid"], "tid": op["tid"],
                      "ts": launch_ts, "dur": Decimal("2.000"),
                      "args": {"External id": op["args"]["External id"], "correlation": corr}})
        added.append({"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float>(float*)", "pid": GPU_PID,
                      "tid": STREAM, "ts": launch_ts + KERNEL_DELAY_US, "dur": Decimal("12.500"),
                      "args": {"correlation": corr, "device": 0, "stream": STREAM}})
    events += added
    events.append({"ph": "M", "name": "process_name", "pid": GPU_PID, "tid": 0, "args": {"name": "GPU 0"}})
    trace["deviceProperties"] = [{"id": 0, "name": "NVIDIA Test GPU", "totalGlobalMem": 1 << 34}]
    path.write_text(decimal_json(trace))
    return len(added) // 2


def decimal_json(value: Any) -> str:
    """JSON text with each Decimal written as its exact decimal digits (never through a binary float)."""
    return json.dumps(value, default=lambda d: f"@@{d}@@").replace('"@@', "").replace('@@"', "")


def nesting_levels(path: Path, tid: int) -> int:
    """The deepest nesting of the framework events (cpu_op, python_function) on thread `tid`, counted from
    the raw JSON with decimal times: a stack of enclosing [start, end) intervals."""
    trace = json.loads(path.read_text(), parse_float=Decimal)
    evs = sorted((e["ts"], -e["dur"]) for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("tid") == tid
                 and e.get("cat") in ("cpu_op", "python_function"))
    stack: list[Decimal] = []
    deepest = 0
    for ts, neg_dur in evs:
        while stack and stack[-1] <= ts:
            stack.pop()
        if stack and ts - neg_dur > stack[-1]:
            continue  # overlaps its parent without nesting: the ingest puts it on a sub-row track
        stack.append(ts - neg_dur)
        deepest = max(deepest, len(stack))
    return deepest


@dataclass
class DeepRun:
    id: str
    path: Path
    tid: int
    kernels: list[tuple[Decimal, Decimal]]  # (ts µs, dur µs) from the JSON
    origin_us: Decimal


def profile_with_device_events(folder: Path, script: tuple[str, str], name: str,
                               launches: int) -> tuple[Path, list[dict[str, Any]]]:
    """Run a profiling script (file name, source; it writes the trace named by its argument), add a CUDA launch and
    a kernel under its ops (add_device_events: at least `launches`); the trace and its complete events (Decimal us)."""
    (folder / script[0]).write_text(script[1])
    path = folder / name
    subprocess.run([sys.executable, str(folder / script[0]), str(path)], check=True, capture_output=True, timeout=120)
    assert add_device_events(path) >= launches
    trace = json.loads(path.read_text(), parse_float=Decimal)
    return path, [e for e in trace["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def deep_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> DeepRun:
    from explorer.runs.ingest import ingest_paths

    path, xs = profile_with_device_events(tmp_path_factory.mktemp("deep"), ("profile_deep.py", DEEP_SCRIPT),
                                          "deep_with_stack.json", 3)
    kernels = sorted((e["ts"], e["dur"]) for e in xs if e.get("cat") == "kernel")
    tid = next(e["tid"] for e in xs if e.get("cat") == "cpu_op")
    rid = ingest_paths(server.state.store, [path], "deep with_stack").id
    # the run's origin is its first real event: not the profiler's own "PyTorch Profiler (0)" span (cat Trace)
    return DeepRun(rid, path, tid, kernels, min(e["ts"] for e in xs if str(e.get("cat")).lower() != "trace"))


@pytest.fixture
def tall_page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1)
    pg = context.new_page()
    pg.set_default_timeout(15000)
    guard = guard_page(pg)
    yield pg
    context.close()
    guard.check()


def open_timeline(page: Any, server: Any, rid: str, query: str = "") -> dict[str, float]:
    """The run's timeline, its Python stacks opened (a click on each band): every depth, under the level budget."""
    page.goto(f"{server.url}/runs/{rid}/timeline{query}")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.minimap().lanes.length > 0 && TE.timelineApi.idle()")
    box = page.locator("#tl-canvas").bounding_box()
    for r in rows(page):
        if r["pythonFolded"]:
            page.mouse.click(box["x"] + GUTTER + 30, box["y"] + r["top"] + 8)
            page.wait_for_function(f"() => !TE.timelineApi.rows().find(r => r.trackId === {r['trackId']}).pythonFolded")
    return box  # type: ignore[no-any-return]


def rows(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("() => TE.timelineApi.rows()")  # type: ignore[no-any-return]


def to_ns(us: Decimal) -> int:
    return int(us * 1000)


def test_three_lanes_fit_one_screen_with_deep_levels_folded(tall_page: Any, server: Any, deep_run: DeepRun,
                                                           shot: Any) -> None:
    page = tall_page
    box = open_timeline(page, server, deep_run.id)
    laid = rows(page)
    heads = {r["key"]: r for r in laid if r["kind"] == "header"}
    assert {"framework", "runtime", "hardware"} <= set(heads)
    three = [r for r in laid if r["lane"] in ("framework", "runtime", "hardware")]
    for r in three:  # every header and track of the three lanes is inside the viewport, no scrolling
        assert box["y"] + r["top"] >= box["y"] and box["y"] + r["top"] + r["h"] <= VIEW_H, r
    deep = next(r for r in laid if r["kind"] == "track" and r["lane"] == "framework" and r["hiddenLevels"])
    cap = page.evaluate("() => TE.timelineApi.levelCap()")
    levels = nesting_levels(deep_run.path, deep_run.tid)
    assert levels > 45 and deep["levels"] == cap and deep["hiddenLevels"] == levels - cap
    bottom = max(r["top"] + r["h"] for r in three)
    assert box["height"] - bottom < TE_ROW_H + 10  # the largest budget that fits: one more level would not (+ a margin)
    shot(page, "lanes-01-three-lanes-one-screen")


def test_fold_band_expands_on_click_and_folds_back(tall_page: Any, server: Any, deep_run: DeepRun, shot: Any) -> None:
    page = tall_page
    box = open_timeline(page, server, deep_run.id)
    deep = next(r for r in rows(page) if r["kind"] == "track" and r["hiddenLevels"])
    drawn = "() => TE.timelineApi.visibleSlices().filter(s => s.lane === 'framework').length"
    before = page.evaluate(drawn)
    page.mouse.click(box["x"] + GUTTER + 30, box["y"] + deep["bandTop"] + 8)
    page.wait_for_function(f"() => TE.timelineApi.rows().find(r => r.trackId === {deep['trackId']}).expanded")
    open_row = next(r for r in rows(page) if r["trackId"] == deep["trackId"])
    assert open_row["levels"] == deep["levels"] + deep["hiddenLevels"] and open_row["h"] > deep["h"]
    page.evaluate("() => TE.timelineApi.drawNow()")
    assert page.evaluate(drawn) > before  # the deeper levels' slices are drawn now
    shot(page, "lanes-02-levels-expanded")
    # every level is taller than the screen now: scroll the band (at its bottom) into view, then fold
    page.evaluate("(y) => TE.timelineApi.scrollTo(TE.timelineApi.scrollTop() + y)", open_row["bandTop"] - 500)
    band_top = next(r for r in rows(page) if r["trackId"] == deep["trackId"])["bandTop"]
    assert 0 < band_top < box["height"] - 20
    page.mouse.click(box["x"] + GUTTER + 30, box["y"] + band_top + 8)
    page.wait_for_function(f"() => !TE.timelineApi.rows().find(r => r.trackId === {deep['trackId']}).expanded")
    assert next(r for r in rows(page) if r["trackId"] == deep["trackId"])["levels"] == deep["levels"]


def test_pin_keeps_a_track_on_top_while_scrolling(tall_page: Any, server: Any, deep_run: DeepRun, shot: Any) -> None:
    page = tall_page
    box = open_timeline(page, server, deep_run.id)
    hw = next(r for r in rows(page) if r["kind"] == "track" and r["lane"] == "hardware")
    page.mouse.click(box["x"] + GUTTER - 12, box["y"] + hw["top"] + 8)  # the pin at the label's right end
    page.wait_for_function(f"() => TE.timelineApi.pinned().includes({hw['trackId']})")
    top_of = f"() => TE.timelineApi.rows().find(r => r.trackId === {hw['trackId']}).top"
    pinned_top = page.evaluate(top_of)
    first_body = min(r["top"] for r in rows(page) if not r["pinned"])
    assert pinned_top < first_body  # above every other track, the framework lane's header included
    page.wait_for_url(f"**pin={hw['trackId']}*")
    deep = next(r for r in rows(page) if r["kind"] == "track" and r["hiddenLevels"])
    page.mouse.click(box["x"] + GUTTER + 30, box["y"] + deep["bandTop"] + 8)  # every level: now it scrolls
    page.wait_for_function(f"() => TE.timelineApi.rows().find(r => r.trackId === {deep['trackId']}).expanded")
    page.evaluate("() => TE.timelineApi.scrollTo(250)")
    assert page.evaluate("() => TE.timelineApi.scrollTop()") == 250
    assert page.evaluate(top_of) == pinned_top  # the pinned track did not move
    sticky = page.evaluate("() => TE.timelineApi.stickyHeader()")
    assert sticky and sticky["key"] == "framework" and sticky["top"] == page.evaluate("() => TE.timelineApi.bodyTop()")
    shot(page, "lanes-03-pinned-and-sticky-header")
    # the header drawn on top still collapses its lane on a click; a collapsed lane keeps a busy row
    page.mouse.click(box["x"] + 60, box["y"] + sticky["top"] + 8)
    page.wait_for_function("() => TE.timelineApi.rows().find(r => r.key === 'framework').collapsed")
    head = next(r for r in rows(page) if r["key"] == "framework")
    assert head["h"] > 22 and not any(r["kind"] == "track" and r["lane"] == "framework" for r in rows(page))
    shot(page, "lanes-04-collapsed-lane-summary")


def test_minimap_shows_busy_per_lane_and_drags_the_window(tall_page: Any, server: Any, deep_run: DeepRun,
                                                          shot: Any) -> None:
    page = tall_page
    box = open_timeline(page, server, deep_run.id)
    mini = page.evaluate("() => TE.timelineApi.minimap()")
    assert mini["lanes"] == ["framework", "runtime", "hardware"]
    span = int(page.evaluate("() => TE.timelineApi.view().span"))
    busy = mini["busy"]["hardware"]
    npp = span / len(busy)
    # hardware busy per column is the kernels of the JSON: each one's columns, and its length in total
    for ts, dur in deep_run.kernels:
        a = to_ns(ts - deep_run.origin_us)
        assert busy[int(a // npp)] > 0 and busy[int((a + to_ns(dur) - 1) // npp)] > 0
    want = sum(to_ns(d) for _, d in deep_run.kernels)
    assert sum(busy) * npp == pytest.approx(want, rel=1e-6)
    # zoom into the first tenth, then drag the window's box on the minimap to the right
    page.evaluate(f"() => TE.timelineApi.setWindow(0, {span // 10})")
    page.wait_for_function("() => TE.timelineApi.idle()")
    b = page.evaluate("() => TE.timelineApi.minimap().box")
    y = box["y"] + b["y"] + b["h"] / 2
    x = box["x"] + (b["x0"] + b["x1"]) / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 300, y, steps=5)
    page.mouse.up()
    view = page.evaluate("() => TE.timelineApi.view()")
    per_px = span / (box["width"] - GUTTER)
    assert view["start"] == pytest.approx(300 * per_px, abs=2 * per_px) and view["span"] == pytest.approx(span // 10, abs=1)
    # the share link follows the drag (saved once the drag ends)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('start') === '{math.floor(view['start'] + 0.5)}'")
    page.wait_for_function("() => TE.timelineApi.covered() && TE.timelineApi.idle()")
    shot(page, "lanes-05-minimap-dragged")


def test_highlight_range_from_the_url_is_drawn_and_kept(tall_page: Any, server: Any, deep_run: DeepRun,
                                                        shot: Any) -> None:
    page = tall_page
    (k1, d1), (k2, _) = deep_run.kernels[:2]
    a, b = to_ns(k1 + d1 - deep_run.origin_us), to_ns(k2 - deep_run.origin_us)  # the device gap between kernels
    box = open_timeline(page, server, deep_run.id, f"?hl_start={a}&hl_end={b}")
    assert page.evaluate("() => TE.timelineApi.highlight()") == [a, b]
    view = page.evaluate("() => TE.timelineApi.view()")
    assert view["start"] < a and view["end"] > b  # no window given: it opens on the highlight
    # the band is painted over the tracks: a pixel inside it, on an empty row, has the highlight's tint
    x = (a + b) / 2
    px = box["x"] + GUTTER + (x - view["start"]) / view["span"] * (box["width"] - GUTTER)
    hw = next(r for r in rows(page) if r["kind"] == "track" and r["lane"] == "hardware")
    tint = page.evaluate("""([x, y]) => Array.from(document.getElementById('tl-canvas').getContext('2d')
        .getImageData(x, y, 1, 1).data)""", [px - box["x"], hw["top"] + 8])
    assert tint[2] < tint[0] - 20  # amber over white (blue well below red), not the plain row
    page.keyboard.press("d")  # pan: the highlight stays in the share link
    page.wait_for_function(f"""() => {{ const p = new URLSearchParams(location.search);
        return p.has('start') && p.get('hl_start') === '{a}' && p.get('hl_end') === '{b}'; }}""")
    shot(page, "lanes-06-highlight-from-url")
    page.goto(f"{server.url}/runs/{deep_run.id}/timeline?start_ns=0&end_ns={b}&hl_start={a}&hl_end={b}")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.evaluate("() => [TE.timelineApi.view().start, TE.timelineApi.view().end]") == [0, b]


# source.window with a delay per call (ms, in call order; later calls none), counting calls not yet answered
DELAYED_SOURCE = """(delays) => {
  const src = TE.timelineApi.source, orig = src.window.bind(src);
  window.pendingWindows = 0;
  src.window = (...args) => {
    const d = delays.length ? delays.shift() : 0;
    window.pendingWindows++;
    return new Promise((r) => setTimeout(r, d)).then(() => orig(...args)).finally(() => { window.pendingWindows--; });
  };
}"""


def test_a_stale_window_answer_never_replaces_a_newer_one(tall_page: Any, server: Any, deep_run: DeepRun) -> None:
    """The race behind a flaky zoom drawn without framework slices: a fetch started by the debounce timer while
    another was in flight answered last, with the old (whole-run) view, over the zoomed one."""
    page = tall_page
    open_timeline(page, server, deep_run.id)
    span = int(page.evaluate("() => TE.timelineApi.view().span"))
    page.evaluate(f"() => TE.timelineApi.setWindow(0, {span // 20})")
    page.wait_for_function("() => TE.timelineApi.covered() && TE.timelineApi.idle()")
    page.evaluate(DELAYED_SOURCE, [600, 2500])
    # back to the whole run: the debounce timer is armed, and a direct fetch starts at once beside it; the
    # timer's fetch (if it starts while the direct one is in flight) is answered last
    page.evaluate(f"() => {{ TE.timelineApi.setWindow(0, {span}); TE.timelineApi.refetch(); }}")
    page.wait_for_timeout(300)
    page.wait_for_function("() => window.pendingWindows <= 1")  # the direct fetch has landed
    page.evaluate(f"() => TE.timelineApi.setWindow({span // 3}, {span // 3 + span // 40})")  # zoom in meanwhile
    page.wait_for_function("() => window.pendingWindows === 0", timeout=10000)
    page.wait_for_function("() => TE.timelineApi.covered() && TE.timelineApi.idle()", timeout=10000)
    assert page.evaluate("() => TE.timelineApi.view().start") == span // 3


def test_chain_panel_gaps_follow_their_link_never_negative(tall_page: Any, server: Any, tmp_path: Path) -> None:
    """An op launching twice while the device runs behind: the details panel's gaps are each from the link
    the step follows (no "-80 µs" from the first kernel to the second launch)."""
    from explorer.runs.ingest import ingest_paths
    from tests.api.test_chain_gaps import EVENTS, start_ns, trace_text

    path = tmp_path / "queued.json"
    path.write_text(trace_text())
    rid = ingest_paths(server.state.store, [path], "queued launches").id
    page = tall_page
    page.goto(f"{server.url}/runs/{rid}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    [sid] = page.evaluate("() => TE.timelineApi.sliceIds('aten::mm')")
    page.evaluate("(id) => TE.timelineApi.select(id)", sid)
    page.wait_for_selector("#tl-chain .gap")
    gaps = page.locator("#tl-chain .gap").all_inner_texts()

    def us(ns: int) -> str:
        return f"+{(Decimal(ns) / 1000).quantize(Decimal('0.1'), ROUND_HALF_UP)} µs"  # as toFixed(1) rounds

    assert gaps == [f"↓ gap {us(start_ns(1) - start_ns(0))}", f"↓ gap {us(start_ns(3) - start_ns(1))}",
                    f"↓ gap {us(start_ns(2) - start_ns(0))} from {EVENTS[0][0]} start",
                    f"↓ gap {us(start_ns(4) - start_ns(2))}"]
