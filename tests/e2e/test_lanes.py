"""End-to-end: the timeline's lanes on one screen. A real `torch.profiler(with_stack=True)` capture of nested
nn.Modules (a framework lane dozens of levels deep) with a CUDA launch and a kernel added under each
`aten::addmm`, so the run has all three lanes; in a 1600x1000 viewport the three lanes fit, deep levels
fold into a "+k levels" band, tracks pin, collapsed lanes keep a busy row, the minimap moves the window,
and a highlight range from the URL is drawn."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
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
    evs = sorted(((e["ts"], -e["dur"]) for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("tid") == tid
                  and e.get("cat") in ("cpu_op", "python_function")))
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


@pytest.fixture(scope="module")
def deep_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> DeepRun:
    from explorer.service import ingest_paths

    d = tmp_path_factory.mktemp("deep")
    (d / "profile_deep.py").write_text(DEEP_SCRIPT)
    path = d / "deep_with_stack.json"
    subprocess.run([sys.executable, str(d / "profile_deep.py"), str(path)], check=True, capture_output=True, timeout=120)
    assert add_device_events(path) >= 3
    trace = json.loads(path.read_text(), parse_float=Decimal)
    xs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    kernels = sorted((e["ts"], e["dur"]) for e in xs if e.get("cat") == "kernel")
    tid = next(e["tid"] for e in xs if e.get("cat") == "cpu_op")
    rid = ingest_paths(server.state.store, [path], "deep with_stack").id
    return DeepRun(rid, path, tid, kernels, min(e["ts"] for e in xs))


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
    page.goto(f"{server.url}/runs/{rid}/timeline{query}")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.minimap().lanes.length > 0 && TE.timelineApi.idle()")
    return page.locator("#tl-canvas").bounding_box()  # type: ignore[no-any-return]


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
