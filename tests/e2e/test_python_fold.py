"""End-to-end: the timeline's first screen on a `with_stack` capture. A real `torch.profiler(with_stack=True)`
capture of a training loop called from a deep Python stack (ProfilerStep markers, forward and backward, an
optimizer), with a CUDA launch and a kernel added under each `aten::addmm` (tests/e2e/test_lanes.py), opened at
1600x1000: the Python frames fold into one band per thread, so the aten ops, the runtime calls and the kernels
are drawn on the first screen without scrolling; a click opens the band (kept in the URL across a reload); an
op reached through a kernel's chain comes out of a fold; the step markers have a readable row."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest

from tests.e2e.conftest import guard_page
from tests.e2e.test_lanes import profile_with_device_events

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STACK_SCRIPT = r"""
import sys, torch
from torch import nn
from torch.profiler import profile, ProfilerActivity, schedule
torch.set_num_threads(1)
class Block(nn.Module):
    def __init__(self):
        super().__init__(); self.lin = nn.Linear(512, 512); self.norm = nn.LayerNorm(512)
    def forward(self, x):
        return torch.relu(self.norm(self.lin(x)))
class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.blocks = nn.Sequential(*[Block() for _ in range(4)])
    def forward(self, x):
        return self.blocks(x).sum()
def train_step(m, opt, x):
    opt.zero_grad(); loss = m(x); loss.backward(); opt.step()
def run(out):
    m = Model(); opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(256, 512)
    train_step(m, opt, x)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(4):
            train_step(m, opt, x); prof.step()
    prof.export_chrome_trace(out)
def launcher(depth, out):  # the caller's own frames above the loop (a launcher, a pipeline, a spawn)
    return launcher(depth - 1, out) if depth else run(out)
launcher(6, sys.argv[1])
"""
VIEW_W, VIEW_H = 1600, 1000
GUTTER = 230  # the timeline's label gutter (timeline.js)
KERNEL = "void gemm_kernel<float>(float*)"  # the kernels add_device_events adds, launched by cudaLaunchKernel


@dataclass
class StackRun:
    id: str
    path: Path
    tid: int
    python_levels: int  # the deepest Python stack of the main thread, from the JSON
    op_levels: int  # the rows its other framework events take with the Python frames folded, from the JSON
    all_levels: int  # its deepest nesting, every framework event counted, from the JSON
    steps: list[str]


def folded_levels(path: Path, tid: int) -> tuple[int, int, int]:
    """(Python levels, op levels, all levels) of thread `tid` from the raw JSON (decimal times): the framework events
    (cpu_op, user_annotation, python_function) nested as a stack of [start, end) intervals (one that overlaps
    its parent without nesting goes to a sub-row track, as the ingest does: left out); a Python frame's level
    is the Python frames open around it, another event's the non-Python ones."""
    trace = json.loads(path.read_text(), parse_float=Decimal)
    evs = sorted((e["ts"], -e["dur"], e["cat"] == "python_function") for e in trace["traceEvents"]
                 if e.get("ph") == "X" and e.get("tid") == tid and e.get("cat") in ("cpu_op", "user_annotation",
                                                                                    "python_function"))
    stack: list[tuple[Decimal, bool]] = []
    python = ops = deepest = 0
    for ts, neg_dur, is_py in evs:
        while stack and stack[-1][0] <= ts:
            stack.pop()
        if stack and ts - neg_dur > stack[-1][0]:
            continue
        open_py = sum(1 for _, p in stack if p)
        if is_py:
            python = max(python, open_py + 1)
        else:
            ops = max(ops, len(stack) - open_py + 1)
        stack.append((ts - neg_dur, is_py))
        deepest = max(deepest, len(stack))
    return python, ops, deepest


@pytest.fixture(scope="module")
def stack_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    from explorer.runs.ingest import ingest_paths

    path, xs = profile_with_device_events(tmp_path_factory.mktemp("pystack"), ("profile_stack.py", STACK_SCRIPT),
                                          "with_stack_gpu.json", 4)
    tid = next(e["tid"] for e in xs if e.get("cat") == "cpu_op")
    steps = sorted(e["name"] for e in xs if e["name"].startswith("ProfilerStep#"))
    python, ops, deepest = folded_levels(path, tid)
    rid = ingest_paths(server.state.store, [path], "with_stack gpu").id
    return StackRun(rid, path, tid, python, ops, deepest, steps)


def tall(browser: Any, height: int = VIEW_H) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": VIEW_W, "height": height}, device_scale_factor=1)
    pg = context.new_page()
    pg.set_default_timeout(15000)
    guard = guard_page(pg)
    yield pg
    context.close()
    guard.check()


@pytest.fixture
def tall_page(browser: Any) -> Iterator[Any]:
    yield from tall(browser)


def open_timeline(page: Any, url: str) -> dict[str, float]:
    page.goto(url)
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.minimap().lanes.length > 0 && TE.timelineApi.idle()")
    return page.locator("#tl-canvas").bounding_box()  # type: ignore[no-any-return]


def rows(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("() => TE.timelineApi.rows()")  # type: ignore[no-any-return]


def names_along(page: Any, y: float) -> set[str]:
    """The names hit-testing finds along canvas row y, pixel by pixel across the plot (slices and merged boxes)."""
    return set(page.evaluate("""(y) => {
        const out = new Set(), w = TE.timelineApi.gutter + TE.timelineApi.plotWidth();
        for (let x = TE.timelineApi.gutter + 1; x < w; x++) {
          const h = TE.timelineApi.hitAt(x, y), v = h && (h.slice || h.merged);
          if (v) out.add(v.name);
        }
        return Array.from(out);
    }""", y))


def main_track(page: Any) -> dict[str, Any]:
    return next(r for r in rows(page) if r["kind"] == "track" and r["python"])


def test_first_screen_shows_ops_runtime_and_kernels_with_the_python_stack_folded(
        tall_page: Any, server: Any, stack_run: StackRun, shot: Any) -> None:
    page = tall_page
    box = open_timeline(page, f"{server.url}/runs/{stack_run.id}/timeline")
    main = main_track(page)
    # one band for the Python stack, the ops in rows below it: the levels counted from the JSON
    assert main["pythonFolded"] and main["python"] == stack_run.python_levels > 15
    assert main["levels"] == 1 + stack_run.op_levels and main["hiddenLevels"] == 0
    for r in rows(page):  # every row of the three lanes inside the viewport: nothing to scroll to
        if r["lane"] in ("framework", "runtime", "hardware"):
            assert box["y"] + r["top"] + r["h"] <= VIEW_H, r
    drawn = page.evaluate("() => TE.timelineApi.visibleSlices()")
    body = box["y"] + page.evaluate("() => TE.timelineApi.bodyTop()")

    def on_screen(pred: Any) -> list[dict[str, Any]]:
        return [s for s in drawn if pred(s) and body <= s["y"] <= VIEW_H]

    assert on_screen(lambda s: s["name"].startswith("aten::") and s["lane"] == "framework")
    # launches and kernels are a pixel or a few wide at this zoom (merged boxes or slices): hit-tested along
    # their rows, which are on the screen
    for lane, name in (("runtime", "cudaLaunchKernel"), ("hardware", KERNEL)):
        found = set().union(*(names_along(page, r["top"] + 8) for r in rows(page) if r["kind"] == "track" and r["lane"] == lane))
        assert name in found, lane
    # the ops sit right under the band: an aten op in the framework track's second row
    assert any(s["name"].startswith("aten::") and abs(s["y"] - (box["y"] + main["top"] + 17 + 8)) < 1 for s in drawn)
    # the step markers: each drawn in a row of its own, wide enough for its name, outside the Python band
    marks = on_screen(lambda s: s["name"].startswith("ProfilerStep#"))
    assert sorted(s["name"] for s in marks) == stack_run.steps
    for s in marks:  # the whole name fits its box (tracks.js draws a label in the box less 6 px, in the canvas' font)
        need = page.evaluate("(n) => document.getElementById('tl-canvas').getContext('2d').measureText(n).width", s["name"])
        assert s["w"] - 6 >= need > 50, (s, need)
    assert len({round(s["y"]) for s in marks}) == 1 and not any(s["y"] < box["y"] + main["top"] + 17 for s in marks)
    # the band says what it is under the pointer, and a click opens it
    page.mouse.move(box["x"] + GUTTER + 400, box["y"] + main["top"] + 8)
    page.wait_for_function("() => (TE.timelineApi.tooltip() || '').startsWith('Python stack: ')")
    assert f"{stack_run.python_levels} levels" in page.evaluate("() => TE.timelineApi.tooltip()")
    shot(page, "pyfold-01-first-screen-with-stack")
    # zoomed to the second step: its ops under the band are labelled, the band names the frames over them
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    step = next(s for s in marks if s["name"] == "ProfilerStep#2")
    view = page.evaluate("() => TE.timelineApi.view()")
    ns_at = lambda x: view["start"] + (x - box["x"] - GUTTER) / (box["width"] - GUTTER) * view["span"]  # noqa: E731
    page.evaluate("([a, b]) => TE.timelineApi.setWindow(a, b)", [ns_at(step["x"] - step["w"] / 2), ns_at(step["x"] + step["w"] / 2)])
    page.wait_for_function("() => TE.timelineApi.covered() && TE.timelineApi.idle()")
    labelled = [s for s in page.evaluate("() => TE.timelineApi.visibleSlices()") if s["name"].startswith("aten::") and s["w"] > 60]
    assert labelled and all(s["y"] < box["y"] + main["top"] + main["h"] for s in labelled)
    shot(page, "pyfold-01b-one-step")


def shared_h100_with_stack(root: Path) -> list[Path]:
    """The Kineto captures under ../shared/traces made on an H100 with `with_stack=True`: a Python frame and the
    device's name within their first 4 MB (a real export writes deviceProperties before its events)."""
    found = []
    for path in sorted([*root.rglob("*.json"), *root.rglob("*.json.gz")]):
        with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as f:
            try:
                head = f.read(4 << 20)
            except (OSError, EOFError):
                continue
        if b'"python_function"' in head and b"H100" in head:
            found.append(path)
    return found


def test_a_shared_h100_with_stack_capture_shows_all_three_lanes_first(tall_page: Any, server: Any, shared_traces: Path,
                                                                      shot: Any) -> None:
    """The issue's own case, on a real H100 capture made with with_stack=True: from ../shared/traces when it holds
    one (INDEX.md lists none today), else from the public captures of TRUTH_CORPUS (docs/truth-corpus.md: TraceLens's
    H100 inference traces are such captures)."""
    from explorer.runs.ingest import ingest_paths

    corpus = os.environ.get("TRUTH_CORPUS")
    paths = shared_h100_with_stack(shared_traces) or (shared_h100_with_stack(Path(corpus)) if corpus else [])
    if not paths:
        pytest.skip("no H100 capture made with with_stack=True among the shared captures (INDEX.md lists none); "
                    "TRUTH_CORPUS=DIR adds the public ones")
    page = tall_page
    rid = ingest_paths(server.state.store, [paths[0]], "shared h100 with_stack").id
    box = open_timeline(page, f"{server.url}/runs/{rid}/timeline")
    assert any(r["pythonFolded"] for r in rows(page))
    for r in rows(page):
        if r["lane"] in ("framework", "runtime", "hardware"):
            assert box["y"] + r["top"] + r["h"] <= VIEW_H, r
    found = {lane: set().union(*(names_along(page, r["top"] + 8 + 17 * k) for r in rows(page) for k in range(3)
                                 if r["kind"] == "track" and r["lane"] == lane and r["h"] > 17 * k))
             for lane in ("framework", "runtime", "hardware")}
    assert any(n.startswith("aten::") for n in found["framework"])
    assert any(n.startswith(("cuda", "cu")) for n in found["runtime"]) and found["hardware"]
    shot(page, "pyfold-05-shared-h100-with-stack")


def test_band_opens_on_click_and_the_link_keeps_it(tall_page: Any, server: Any, stack_run: StackRun,
                                                   shot: Any) -> None:
    page = tall_page
    box = open_timeline(page, f"{server.url}/runs/{stack_run.id}/timeline")
    main = main_track(page)
    tid = main["trackId"]
    page.mouse.click(box["x"] + GUTTER + 400, box["y"] + main["top"] + 8)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('py') === '{tid}'")
    opened = next(r for r in rows(page) if r["trackId"] == tid)
    # every depth now (the JSON's nesting), under the level budget: the three lanes still fit the screen
    assert not opened["pythonFolded"] and opened["levels"] + opened["hiddenLevels"] == stack_run.all_levels
    for r in rows(page):
        if r["lane"] in ("framework", "runtime", "hardware"):
            assert box["y"] + r["top"] + r["h"] <= VIEW_H, r
    frames = [s for s in page.evaluate("() => TE.timelineApi.visibleSlices()") if s["name"].endswith(": run")]
    assert frames and not any(s["python"] for s in frames)  # a frame in a row of its own
    shot(page, "pyfold-02-python-stack-open")
    page.reload()
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function(f"() => TE.timelineApi.rows().some(r => r.trackId === {tid} && r.python && !r.pythonFolded)")
    again = next(r for r in rows(page) if r["trackId"] == tid)
    assert (again["levels"], again["hiddenLevels"]) == (opened["levels"], opened["hiddenLevels"])
    # the band under the track shows every level (when some are folded); the track's label folds the stack back
    if again["hiddenLevels"]:
        page.mouse.click(box["x"] + GUTTER + 30, box["y"] + again["bandTop"] + 8)
        page.wait_for_function(f"() => TE.timelineApi.rows().some(r => r.trackId === {tid} && r.expanded)")
        assert next(r for r in rows(page) if r["trackId"] == tid)["levels"] == stack_run.all_levels
    page.mouse.move(box["x"] + 60, box["y"] + again["top"] + 8)
    page.wait_for_function("() => (TE.timelineApi.tooltip() || '').includes('click to fold its Python stack')")
    page.mouse.click(box["x"] + 60, box["y"] + again["top"] + 8)
    page.wait_for_function(f"() => TE.timelineApi.rows().some(r => r.trackId === {tid} && r.pythonFolded)")
    page.wait_for_function("() => { const p = new URLSearchParams(location.search); return !p.has('py') && !p.has('open'); }")


def test_a_kernels_chain_reveals_its_op_out_of_a_fold(browser: Any, server: Any, stack_run: StackRun,
                                                      shot: Any) -> None:
    """A short window folds the op rows too ("+k levels"): following a kernel's chain to its `aten::addmm`
    opens the fold and scrolls the op into view."""
    for page in tall(browser, 330):
        box = open_timeline(page, f"{server.url}/runs/{stack_run.id}/timeline")
        assert page.evaluate("() => TE.timelineApi.levelCap()") == 2  # the band and one row of ops
        query = urlencode({"q": KERNEL, "limit": 1})
        with urlopen(f"{server.url}/api/runs/{stack_run.id}/search?{query}") as resp:  # sub-pixel here: no id drawn
            kernel = json.load(resp)["matches"][0]["slice_id"]
        page.evaluate("(id) => TE.timelineApi.select(id)", kernel)
        page.wait_for_selector("#tl-chain li")
        chain = page.evaluate("() => TE.timelineApi.selection().chain")
        op = next(c for c in chain if c["name"] == "aten::addmm")
        where = page.evaluate("(id) => TE.timelineApi.sliceRow(id)", op["slice_id"])
        before = page.evaluate("([t, d, f]) => TE.timelineApi.rowOfSlice(t, d, f)",
                               [where["trackId"], where["depth"], where["fold"]])
        assert before["hidden"]  # in the "+k levels" band under the op rows that fit
        page.locator("#tl-chain li", has_text="aten::addmm").first.click()
        page.wait_for_function(f"() => TE.timelineApi.selection().event.slice_id === {op['slice_id']}")
        page.wait_for_function(f"() => TE.timelineApi.rows().some(r => r.trackId === {where['trackId']} && r.expanded)")
        assert next(r for r in rows(page) if r["trackId"] == where["trackId"])["pythonFolded"]  # the op rows opened, not the stack
        page.wait_for_function("() => TE.timelineApi.covered() && TE.timelineApi.idle()")
        now = page.evaluate("(id) => TE.timelineApi.sliceRow(id)", op["slice_id"])
        after = page.evaluate("([t, d, f]) => TE.timelineApi.rowOfSlice(t, d, f)", [now["trackId"], now["depth"], now["fold"]])
        assert not after["hidden"]
        drawn = [s for s in page.evaluate("() => TE.timelineApi.visibleSlices()") if s["id"] == op["slice_id"]]
        assert drawn and box["y"] + page.evaluate("() => TE.timelineApi.bodyTop()") <= drawn[0]["y"] <= box["y"] + box["height"]
        page.wait_for_function(f"() => new URLSearchParams(location.search).get('open') === '{where['trackId']}'")
        shot(page, "pyfold-03-chain-reveals-op")


def test_a_capture_without_python_frames_draws_as_before(tall_page: Any, server: Any, shot: Any) -> None:
    """The session's fused rmsnorm capture (no with_stack): no band, no Python row; its ops at their depths."""
    page = tall_page
    open_timeline(page, f"{server.url}/runs/{server.runs['fused']}/timeline")
    tracks = [r for r in rows(page) if r["kind"] == "track"]
    assert tracks and not any(r["python"] or r["pythonFolded"] for r in tracks)
    assert any(s["name"].startswith("aten::") for s in page.evaluate("() => TE.timelineApi.visibleSlices()"))
    shot(page, "pyfold-04-no-with-stack")
