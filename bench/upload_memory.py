"""What a big upload costs the server's memory (issue 15: "a 2 GB upload does not raise the server's RSS by
more than the setting"). A synthetic Kineto trace (bench/synth.py, ~2 GB by default) is uploaded over HTTP to
the real `trace-explorer serve` in a subprocess, started with EXPLORER_INGEST_MEMORY_MB; the server's RSS is
read from /proc every 20 ms from before the upload until the run is ready and the server idles again.

Printed: the server's RSS before; its peak while it received the upload and the run was queued or
ingesting, and that rise against the memory setting; its peak once the run was ready (the server loads a
new run for its first views: its cached columns and timeline index) and what it holds after.

    .venv/bin/python bench/upload_memory.py [--events 9500000] [--memory-mb 1500]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import free_port, rss_mib, upload  # noqa: E402
from synth import write_kineto_trace  # noqa: E402


class Sampler:
    """The server's RSS (MiB) every 20 ms, with the time of each sample."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.samples.append((time.perf_counter(), rss_mib(self.pid)))

    def peak(self, since: float = 0.0) -> float:
        return max([r for t, r in self.samples if t >= since] or [0.0])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=9_500_000, help="events of the synthetic trace (~213 B each)")
    ap.add_argument("--memory-mb", type=int, default=1500, help="EXPLORER_INGEST_MEMORY_MB of the server")
    args = ap.parse_args()
    exe = Path(sys.executable).parent / "trace-explorer"
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        size = write_kineto_trace(trace, args.events)
        port = free_port()
        env = {**os.environ, "EXPLORER_INGEST_MEMORY_MB": str(args.memory_mb)}
        server = subprocess.Popen([str(exe), "serve", "--port", str(port), "--data-dir", str(Path(tmp) / "data")],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"{base}/api/runs", timeout=2).raise_for_status()
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise SystemExit("the server did not start") from None
                    time.sleep(0.2)
            time.sleep(1.0)  # past start-up's own work
            before = rss_mib(server.pid)
            sampler = Sampler(server.pid)
            started = time.perf_counter()
            run_id = upload(base, trace)
            uploaded = time.perf_counter()
            slowest = 0.0  # the slowest answer to a status poll while the server ingests: is it still responsive?
            while True:
                asked = time.perf_counter()
                status = httpx.get(f"{base}/api/runs/{run_id}", timeout=120).json()
                slowest = max(slowest, time.perf_counter() - asked)
                if status["status"] in ("ready", "failed"):
                    break
                time.sleep(0.2)
            ready = time.perf_counter()
            time.sleep(5.0)  # the server's own work after an ingest (its window index) settles
            sampler.stop()
            after = rss_mib(server.pid)
            during = max([r for t, r in sampler.samples if t < ready] or [0.0])
            loaded = sampler.peak(since=ready)
            print(f"{args.events:,} events, {size / 1e6:,.0f} MB uploaded to `serve` with EXPLORER_INGEST_MEMORY_MB="
                  f"{args.memory_mb}: run {status['status']}"
                  + (f" ({status.get('message')})" if status["status"] != "ready" else ""))
            print(f"  upload {uploaded - started:.1f} s, ingest until ready {ready - uploaded:.1f} s; "
                  f"slowest answer to a status poll meanwhile {slowest * 1000:,.0f} ms")
            rise = during - before
            print(f"  server RSS before {before:,.0f} MiB; peak while receiving and ingesting {during:,.0f} MiB: "
                  f"a rise of {rise:,.0f} MiB ({rise * 2**20 / 1e6:,.0f} MB) against the setting of {args.memory_mb:,} MB, "
                  + ("within it" if rise * 2**20 <= args.memory_mb * 1e6 else "OVER it"))
            print(f"  once ready (the run loaded for its first views): peak {loaded:,.0f} MiB, {after:,.0f} MiB after")
        finally:
            server.terminate()
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
