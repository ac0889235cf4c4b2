"""Reliability under load, on loopback only (ARCHITECTURE §8 budgets; issue 16):

1. timeline windows of a ready run while a 1 M-event upload ingests in the same server: p50/p95 of
   the server's own time (`Server-Timing`) and of the client's round trip;
2. three heavy SQL queries at once: the server's peak RSS while they run, against the SQL bounds
   (explorer/store/sql.py: 2 queries at a time, each with half of 2 GB), and what each answered.

The server is the real `trace-explorer serve` in a subprocess; RSS is read from /proc.

    .venv/bin/python bench/load.py [--events 1000000] [--windows 200]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import write_kineto_trace  # noqa: E402

HEAVY_SQL = ("select a.name, count(*) as n, sum(b.dur_ns) as total from slices a join slices b "
             "on a.track_id = b.track_id and b.ts_ns between a.ts_ns and a.ts_ns + 1000000 group by 1 order by 3 desc")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def upload(base: str, path: Path) -> str:
    with path.open("rb") as f:
        r = httpx.post(f"{base}/api/runs", files={"files": (path.name, f)}, timeout=600)
    r.raise_for_status()
    return str(r.json()["id"])


def wait_ready(base: str, run_id: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while httpx.get(f"{base}/api/runs/{run_id}").json()["status"] not in ("ready", "failed"):
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run_id} did not finish")
        time.sleep(0.1)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--windows", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp) / "small.json", Path(tmp) / "big.json"
        write_kineto_trace(small, 100_000)
        write_kineto_trace(big, args.events)
        port = free_port()
        exe = Path(sys.executable).parent / "trace-explorer"
        server = subprocess.Popen([str(exe), "serve", "--port", str(port), "--data-dir", str(Path(tmp) / "data")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    httpx.get(f"{base}/-/health", timeout=1)
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            ready = upload(base, small)
            wait_ready(base, ready)
            span = httpx.get(f"{base}/api/runs/{ready}").json()["summary"]["span_ns"]
            httpx.get(f"{base}/api/runs/{ready}/timeline", params={"width_px": 2000}, timeout=60)  # index built

            busy_id: list[str] = []
            ingest = threading.Thread(target=lambda: busy_id.append(upload(base, big)))
            ingest.start()
            server_ms, client_ms = [], []
            while len(server_ms) < args.windows:
                start = (len(server_ms) * 7919) % max(span // 2, 1)
                t0 = time.perf_counter()
                r = httpx.get(f"{base}/api/runs/{ready}/timeline", timeout=60,
                              params={"start_ns": start, "end_ns": start + span // 10, "width_px": 2000})
                client_ms.append((time.perf_counter() - t0) * 1000)
                server_ms.append(float(r.headers["server-timing"].split("dur=")[1]))
            ingest.join()
            wait_ready(base, busy_id[0])
            print(f"windows during a {args.events:,}-event ingest ({len(server_ms)} windows of 10 % at 2,000 px):")
            print(f"  server p50 {statistics.median(server_ms):.1f} ms, p95 {pct(server_ms, 0.95):.1f} ms;"
                  f" client round trip p50 {statistics.median(client_ms):.1f} ms, p95 {pct(client_ms, 0.95):.1f} ms")

            before = rss_mib(server.pid)
            peak = [before]
            answers: list[str] = []
            stop = threading.Event()

            def watch() -> None:
                while not stop.wait(0.05):
                    peak.append(rss_mib(server.pid))

            def query() -> None:
                r = httpx.post(f"{base}/api/runs/{busy_id[0]}/sql", json={"sql": HEAVY_SQL}, timeout=120)
                err = r.json().get("error", {})
                answers.append(f"{r.status_code} {err.get('code', 'ok')}" + (f" ({err['message'][:70]})" if err else ""))

            watcher = threading.Thread(target=watch)
            watcher.start()
            queries = [threading.Thread(target=query) for _ in range(3)]
            for q in queries:
                q.start()
            for q in queries:
                q.join()
            stop.set()
            watcher.join()
            print(f"3 heavy SQL queries at once: server RSS {before:.0f} MiB before, peak {max(peak):.0f} MiB "
                  f"(+{max(peak) - before:.0f}); answers: {', '.join(sorted(answers))}")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
