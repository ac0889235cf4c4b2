"""Timeline performance in headless Chromium on a synthetic run (default 1 M events).

Measures (ARCHITECTURE §8 budgets: first paint <= 1.5 s, pan/zoom >= 30 fps):
  first paint  navigation start -> the first timeline frame drawn with data (`tl-first-paint` mark)
  zoom/pan     50 scripted steps (zoom in/out around the cursor, pan left/right), one per animation
               frame, each redrawn from the cached window while refetches run in the background;
               fps = steps / elapsed, plus the slowest frame and the mean draw time.

Usage: python bench/ui.py [--events N] [--data-dir DIR (reuse an ingested run)] [--runs 3]
Needs `chromium` (Debian package) and the project installed (`make install`).
"""

from __future__ import annotations

import argparse
import json
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


def prepare(data_dir: Path, events: int) -> str:
    from explorer.service import ingest_paths
    from explorer.store.runs import RunStore

    store = RunStore(data_dir)
    name = f"synth-{events}"
    existing = [r for r in store.catalog.list(name=name)[0] if r.status == "ready"]
    if existing:
        return existing[0].id
    from synth import write_kineto_trace

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "synth.json"
        t = time.perf_counter()
        size = write_kineto_trace(trace, events)
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


def measure(url: str, run_id: str, runs: int, chromium: str) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
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
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--data-dir", type=Path, default=None, help="reuse (or create) the run in this data folder")
    ap.add_argument("--runs", type=int, default=5, help="warm page loads to measure (after one cold load)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args()
    tmp = None
    if args.data_dir is None:
        tmp = tempfile.TemporaryDirectory()
        args.data_dir = Path(tmp.name)
    run_id = prepare(args.data_dir, args.events)
    url, server = serve(args.data_dir)
    try:
        results = measure(url, run_id, args.runs, args.chromium)
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
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
