"""Page and timeline performance in headless Chromium on a synthetic run (default 1 M events).

Measures (issue 12 targets: every page cold <= 1.0 s, warm <= 0.3 s, a table sort <= 100 ms; ARCHITECTURE
§8: timeline first paint <= 1.5 s, pan/zoom >= 30 fps):
  page loads   every page (runs list, overview, ops, kernels, timeline, compare, SQL and device pages when
               the server has them): navigation start -> the page ready (scripts run, charts drawn, the
               tables taken over, the timeline's first frame). cold: a fresh browser profile (empty cache);
               warm: the same page again in that profile (assets from the cache). Median of --runs.
               The first load of each page is not counted: it fills the server's per-run caches.
  sort         click a column of the op table and wait for the next frame (the rows re-sorted and
               redrawn in the browser), on a second run with thousands of distinct ops (--wide-ops).
  first paint  navigation start -> the first timeline frame drawn with data (`tl-first-paint` mark)
  zoom/pan     50 scripted steps (zoom in/out around the cursor, pan left/right), one per animation
               frame, each redrawn from the cached window while refetches run in the background;
               fps = steps / elapsed, plus the slowest frame and the mean draw time.

Usage: python bench/ui.py [--events N] [--data-dir DIR (reuse ingested runs)] [--runs 5]
Needs `chromium` (Debian package) and the project installed (`make install`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]

STEPS_JS = """async (steps) => {
  const tl = TE.timelineApi;
  const plan = [];
  for (let i = 0; i < steps; i++) {
    const k = i % 10;
    plan.push(k < 3 ? ["zoom", 0.7] : k < 5 ? ["pan", 0.2] : k < 7 ? ["pan", -0.15] : k < 9 ? ["zoom", 1.3] : ["pan", 0.05]);
  }
  let drawMs = 0, worst = 0, last = performance.now();
  const t0 = last;
  for (const [kind, v] of plan) {
    await new Promise((resolve) => requestAnimationFrame(() => {
      if (kind === "zoom") tl.zoomAt(v, tl.gutter + tl.plotWidth() * 0.6); else tl.pan(tl.view().span * v);
      const a = performance.now();
      tl.drawNow();  // draw in this frame, from whatever window is cached
      drawMs += performance.now() - a;
      resolve();
    }));
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }
  const elapsed = performance.now() - t0;
  return {fps: steps / (elapsed / 1000), elapsed_ms: elapsed, worst_frame_ms: worst, mean_draw_ms: drawMs / steps,
          fetches: tl.fetches()};
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prepare(data_dir: Path, events: int, distinct: int = 0) -> str:
    from explorer.runs.ingest import ingest_paths
    from explorer.store.runs import RunStore

    store = RunStore(data_dir)
    name = f"synth-{events}" + (f"-{distinct}-names" if distinct else "")
    existing = [r for r in store.catalog.list(name=name)[0] if r.status == "ready" and r.name == name]
    if existing:
        store.catalog.close()
        return existing[0].id
    from synth import write_kineto_trace

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "synth.json"
        t = time.perf_counter()
        size = write_kineto_trace(trace, events, distinct=distinct)
        print(f"generated {events:,} events ({size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        rec = ingest_paths(store, [trace], name)
        print(f"ingested in {time.perf_counter() - t:.1f} s: {rec.summary.slices:,} slices", flush=True)
    store.catalog.close()
    return rec.id


def serve(data_dir: Path) -> tuple[str, Any]:
    import uvicorn

    from api.app import create_app
    from explorer.config import Settings

    app = create_app(Settings(data_dir=data_dir))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(400):
        try:
            with urlopen(url + "/-/health", timeout=1):
                return url, server
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


# a page is ready when its scripts ran, every chart is drawn, every live table has its rows and the
# timeline (if any) drew its first frame
READY_JS = """() => document.body && document.body.dataset.init === '1'
  && Array.from(document.querySelectorAll('.chart')).every((c) => c.querySelector('.main-svg'))
  && Array.from(document.querySelectorAll('table[data-live]')).every((t) => t.dataset.live === '1')
  && Array.from(document.querySelectorAll('#timeline')).every((t) => t.dataset.ready === '1')"""
LOAD_JS = """() => ({ready_ms: performance.now(),
  bytes: performance.getEntriesByType('navigation')[0].transferSize
         + performance.getEntriesByType('resource').reduce((n, e) => n + e.transferSize, 0)})"""
SORT_JS = """async (col) => {
  const a = document.querySelector(`#ops-table th[data-col='${col}'] a`);
  const t0 = performance.now();
  a.click();
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));  // the frame with the new rows
  return performance.now() - t0;
}"""
DEVICE_EXPORT = ROOT / "tests" / "fixtures" / "neuron" / "device_export"
SORT_COLUMNS = ("calls", "name", "cpu_total_ns", "self_cpu_ns", "device_total_ns", "device_pct")


def page_paths(url: str, run_id: str, other_id: str) -> dict[str, str]:
    """The pages to time; the SQL page and device pages only where this server has them."""
    paths = {"runs list": "/", "overview": f"/runs/{run_id}", "ops": f"/runs/{run_id}/ops",
             "kernels": f"/runs/{run_id}/kernels", "timeline": f"/runs/{run_id}/timeline",
             "compare": f"/compare?runs={run_id},{other_id}"}
    for name, path in (("sql", f"/runs/{run_id}/sql"),):
        try:
            with urlopen(url + path, timeout=30):
                paths[name] = path
        except OSError:
            pass
    with urlopen(f"{url}/api/runs?limit=1000", timeout=30) as resp:
        runs = json.load(resp)["runs"]
    for run in runs:  # a run with device profiles (Neuron) in the data folder: its first device page
        with urlopen(f"{url}/api/runs/{run['id']}/device/profiles", timeout=30) as resp:
            profiles = json.load(resp)["profiles"]
        if profiles and "device" not in paths:
            paths["device"] = f"/runs/{run['id']}/device/{profiles[0]['profile_id']}"
    return paths


def prepare_device(data_dir: Path, export: Path) -> None:
    """A Neuron device profile run (the test fixture's export), for the device page's figures."""
    from explorer.runs.ingest import ingest_paths
    from explorer.store.runs import RunStore

    store = RunStore(data_dir)
    if not [r for r in store.catalog.list(name="neuron device export")[0] if r.status == "ready"]:
        ingest_paths(store, [export], "neuron device export")
    store.catalog.close()


def load(page: Any, url: str) -> dict[str, float]:
    page.goto(url)
    page.wait_for_function(READY_JS, timeout=120000, polling=10)
    return dict(page.evaluate(LOAD_JS))


def measure_pages(browser: Any, url: str, paths: dict[str, str], runs: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, path in paths.items():
        ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        first = load(ctx.new_page(), url + path)  # fills the server's caches for this run (not counted)
        ctx.close()
        cold, warm, cold_bytes, warm_bytes = [], [], [], []
        for _ in range(runs):
            ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
            page = ctx.new_page()
            c = load(page, url + path)
            w = load(page, url + path)
            cold.append(c["ready_ms"])
            warm.append(w["ready_ms"])
            cold_bytes.append(c["bytes"])
            warm_bytes.append(w["bytes"])
            ctx.close()
        out[name] = {"first_ms": first["ready_ms"], "cold_ms": median(cold), "warm_ms": median(warm),
                     "cold_kb": median(cold_bytes) / 1e3, "warm_kb": median(warm_bytes) / 1e3}
        print(f"  {name:10s} {json.dumps({k: round(v, 1) for k, v in out[name].items()})}", flush=True)
    return out


def measure_sort(browser: Any, url: str, run_id: str, runs: int) -> dict[str, float]:
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    load(page, f"{url}/runs/{run_id}/ops")
    rows = int(page.evaluate("() => Number(document.getElementById('ops-count').textContent.replace(/,/g, ''))"))
    times = [float(page.evaluate(SORT_JS, col)) for _ in range(runs) for col in SORT_COLUMNS]
    ctx.close()
    return {"rows": rows, "median_ms": median(times), "max_ms": max(times)}


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure(url: str, run_id: str, runs: int, chromium: str, other_id: str, wide_id: str) -> tuple[
        list[dict[str, Any]], dict[str, dict[str, float]], dict[str, float]]:
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        print("page loads (ms, kB transferred):", flush=True)
        pages = measure_pages(browser, url, page_paths(url, run_id, other_id), runs)
        sort = measure_sort(browser, url, wide_id, runs)
        # the first load is cold: the server builds the run's timeline index (once per run, then cached)
        for _ in range(runs + 1):
            ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
            page = ctx.new_page()
            page.goto(f"{url}/runs/{run_id}/timeline")
            page.wait_for_selector("#timeline[data-ready='1']", timeout=60000)
            first_paint = page.evaluate("() => performance.getEntriesByName('tl-first-paint')[0].startTime")
            steps = page.evaluate(STEPS_JS, 50)
            results.append({"first_paint_ms": first_paint, **steps})
            ctx.close()
        browser.close()
    return results, pages, sort


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--data-dir", type=Path, default=None, help="reuse (or create) the run in this data folder")
    ap.add_argument("--runs", type=int, default=5, help="loads of each page to measure (after one cold load)")
    ap.add_argument("--wide-events", type=int, default=200_000,
                    help="events of the runs beside the main one: the compare page's, and the sort's (--wide-ops)")
    ap.add_argument("--wide-ops", type=int, default=2_000, help="distinct op names of the second run")
    ap.add_argument("--device-export", type=Path, default=DEVICE_EXPORT,
                    help="a Neuron device export to ingest for the device page (skipped when absent)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    tmp = None
    if args.data_dir is None:
        tmp = tempfile.TemporaryDirectory()
        args.data_dir = Path(tmp.name)
    run_id = prepare(args.data_dir, args.events)
    wide_id = prepare(args.data_dir, args.wide_events, args.wide_ops)
    other_id = prepare(args.data_dir, args.wide_events)  # the compare page's second run: the same ops, fewer steps
    if args.device_export.exists():
        prepare_device(args.data_dir, args.device_export)
    url, server = serve(args.data_dir)
    load_before = os.getloadavg()[0]
    try:
        results, pages, sort = measure(url, run_id, args.runs, args.chromium, other_id, wide_id)
    finally:
        server.should_exit = True
    for i, r in enumerate(results):
        print(("cold " if i == 0 else "warm ") + json.dumps({k: round(v, 1) if isinstance(v, float) else v
                                                          for k, v in r.items()}))
    cold, warm = results[0], results[1:]
    median_fp = sorted(r["first_paint_ms"] for r in warm)[len(warm) // 2]
    fps = sorted(r["fps"] for r in results)[len(results) // 2]
    print(f"timeline, {args.events:,} events: first paint {median_fp:.0f} ms (median of {len(warm)} loads; "
          f"{cold['first_paint_ms']:.0f} ms on the run's first load, index build included); "
          f"50 zoom/pan steps {fps:.1f} fps (median), slowest frame "
          f"{max(r['worst_frame_ms'] for r in results):.0f} ms, mean draw "
          f"{sum(r['mean_draw_ms'] for r in results) / len(results):.2f} ms")
    print(f"load average (1 min) {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
          f"{os.cpu_count()} CPUs")
    print(f"pages, {args.events:,}-event run (median of {args.runs}; target cold <= 1000 ms, warm <= 300 ms):")
    for name, r in pages.items():
        ok = "met" if r["cold_ms"] <= 1000 and r["warm_ms"] <= 300 else "NOT met"
        print(f"  {name:10s} cold {r['cold_ms']:6.0f} ms ({r['cold_kb']:7.0f} kB)   warm {r['warm_ms']:5.0f} ms "
              f"({r['warm_kb']:5.0f} kB)   first load {r['first_ms']:6.0f} ms   {ok}")
    print(f"op table sort, {sort['rows']:,} rows ({args.wide_events:,}-event run): median {sort['median_ms']:.1f} ms, "
          f"slowest {sort['max_ms']:.1f} ms (target <= 100 ms: {'met' if sort['max_ms'] <= 100 else 'NOT met'})")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
