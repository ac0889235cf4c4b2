"""Timeline window benchmark: p50/p95 server time and payload size of level-of-detail windows.

Builds synthetic Kineto runs (bench/synth.py) of several sizes, ingests them, then asks the real
ASGI app for windows of the full span, 10 % and 0.1 % of it at 2,000 px, at random positions.
Server time is the app's own `Server-Timing` (handler + JSON encoding), not the client's.
Budget (ARCHITECTURE.md §8): p95 <= 50 ms on a 1 M-event run, payload bounded by width. The same windows
over a run of one synthetic Neuron device profile (bench/device.py's export: 1 M instructions over six
engine rows plus DMA packets) measure the device tracks, and runs of many distinct thread ids (one op each,
`--threads`) the total bound: a window sends the tracks that fit its height and summarises the rest.

    .venv/bin/python bench/window.py [--events 100000,1000000] [--device-instructions 1000000] [--width 2000]
                                     [--threads 100000,1000000] [--repeat 40]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from api.app import create_app  # noqa: E402
from explorer.config import Settings  # noqa: E402
from explorer.ingest.limits import IngestLimits  # noqa: E402
from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402

WINDOWS = (("full span", 1.0), ("10 %", 0.1), ("0.1 %", 0.001))


def write_trace(path: Path, n_events: int) -> None:
    try:
        from synth import write_kineto_trace
    except ImportError:  # bench/synth.py is the shared generator; without it there is nothing to measure
        raise SystemExit("bench/synth.py (write_kineto_trace) is missing") from None
    write_kineto_trace(path, n_events)


def write_many_threads_trace(path: Path, threads: int) -> int:
    """A Chrome trace of `threads` distinct thread ids in one process, one op on each (thread t: `op{t % 7}`
    at 3t + 0.5 µs for 5 + t % 4 µs, so neighbours overlap): a run of that many tracks. Returns its size."""
    with path.open("w") as f:
        f.write('{"traceEvents": [\n{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}')
        for t in range(threads):
            f.write(f',\n{{"ph": "X", "cat": "cpu_op", "name": "op{t % 7}", "pid": 1, "tid": {t + 1}, '
                    f'"ts": {3 * t}.5, "dur": {5 + t % 4}}}')
        f.write("\n]}\n")
    return path.stat().st_size


def ready_run(store: RunStore, name: str) -> str | None:
    """The id of a ready run called `name` from an earlier benchmark, to reuse."""
    found = [r for r in store.catalog.list(name=name, status="ready", limit=10)[0] if r.name == name]
    return found[0].id if found else None


def ensure_run(data_dir: Path, n_events: int) -> str:
    """A ready run of about n_events events in data_dir, ingested once and reused."""
    store = RunStore(data_dir)
    name = f"synthetic-{n_events}"
    if (existing := ready_run(store, name)) is not None:
        return existing
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / f"{name}.json"
        started = time.perf_counter()
        write_trace(trace, n_events)
        print(f"  wrote {trace.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s", flush=True)
        started = time.perf_counter()
        rec = ingest_paths(store, [trace], name)
        print(f"  ingested {rec.summary.slices:,} slices in {time.perf_counter() - started:.1f} s", flush=True)
    return rec.id


def ensure_device_run(data_dir: Path, n_instructions: int) -> str:
    """A ready run of one synthetic device profile of n_instructions instructions (and a fifth as many DMA
    packets), ingested once and reused."""
    from device import write_export

    store = RunStore(data_dir)
    name = f"synthetic-device-{n_instructions}"
    if (existing := ready_run(store, name)) is not None:
        return existing
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "bench@latest"
        write_export(folder, n_instructions, n_instructions // 5)
        started = time.perf_counter()
        rec = ingest_paths(store, [folder], name)
        print(f"  ingested a device profile of {n_instructions:,} instructions in "
              f"{time.perf_counter() - started:.1f} s", flush=True)
    return rec.id


def ensure_threads_run(data_dir: Path, threads: int) -> str:
    """A ready run of `threads` distinct thread ids (write_many_threads_trace), ingested once and reused."""
    store = RunStore(data_dir)
    name = f"synthetic-threads-{threads}"
    if (existing := ready_run(store, name)) is not None:
        return existing
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / f"{name}.json"
        size = write_many_threads_trace(trace, threads)
        started = time.perf_counter()
        # past the default track limit (Settings.max_tracks) only when asked for: the window must hold either way
        limits = IngestLimits(max_tracks=max(threads, IngestLimits().max_tracks))
        rec = ingest_paths(store, [trace], name, limits=limits)
        print(f"  ingested {threads:,} threads ({size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s",
              flush=True)
    return rec.id


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_run(client: TestClient, run_id: str, width: int, repeat: int, seed: int = 7) -> list[dict[str, object]]:
    span = client.get(f"/api/runs/{run_id}").json()["summary"]["span_ns"]
    started = time.perf_counter()
    client.get(f"/api/runs/{run_id}/timeline", params={"width_px": width, "end_ns": 1 + span // 1000})
    index_s = time.perf_counter() - started
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    for label, fraction in WINDOWS:
        times, sizes, shapes = [], [], []
        length = max(1, int(span * fraction))
        for _ in range(repeat):
            start = rng.randrange(0, max(1, span - length + 1))
            r = client.get(f"/api/runs/{run_id}/timeline",
                           params={"start_ns": start, "end_ns": start + length, "width_px": width})
            r.raise_for_status()
            times.append(float(r.headers["server-timing"].split("dur=")[1]))
            sizes.append(len(r.content))
            body = r.json()
            shapes.append(sum(len(t["slices"]["id"]) + len(t["merged"]["ts"])
                              for t in body["tracks"] if t["kind"] == "slice"))
        rows.append({"window": label, "p50_ms": statistics.median(times), "p95_ms": percentile(times, 0.95),
                     "payload_kb": statistics.median(sizes) / 1024, "max_payload_kb": max(sizes) / 1024,
                     "shapes": max(shapes), "index_build_s": index_s})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", default="100000,1000000", help="comma-separated run sizes (events)")
    parser.add_argument("--device-instructions", default="1000000",
                        help="comma-separated device-profile sizes (instructions); empty for none")
    parser.add_argument("--threads", default="100000",
                        help="comma-separated run sizes in distinct thread ids (tracks); empty for none")
    parser.add_argument("--width", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "explorer-bench-window")
    args = parser.parse_args()
    sizes = [int(s) for s in args.events.split(",") if s.strip()]
    results: list[tuple[str, str]] = []
    for n in sizes:
        print(f"run of {n:,} events:", flush=True)
        results.append((f"{n:,}", ensure_run(args.data_dir, n)))
    for n in [int(s) for s in args.device_instructions.split(",") if s.strip()]:
        print(f"device profile of {n:,} instructions:", flush=True)
        results.append((f"{n:,} instructions", ensure_device_run(args.data_dir, n)))
    for n in [int(s) for s in args.threads.split(",") if s.strip()]:
        print(f"run of {n:,} threads:", flush=True)
        results.append((f"{n:,} threads", ensure_threads_run(args.data_dir, n)))
    print(f"\nTimeline windows at {args.width} px, {args.repeat} random positions each "
          "(server time from Server-Timing):\n")
    print("| run events | window | p50 ms | p95 ms | payload KB (median / max) | shapes (max) |")
    print("|---:|---|---:|---:|---:|---:|")
    with TestClient(create_app(Settings(data_dir=args.data_dir, allowed_hosts=["testserver"]))) as client:
        for n, run_id in results:
            rows = bench_run(client, run_id, args.width, args.repeat)
            for row in rows:
                print(f"| {n} | {row['window']} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} | "
                      f"{row['payload_kb']:.0f} / {row['max_payload_kb']:.0f} | {row['shapes']:,} |")
            print(f"|  | (first request, builds the run's window index) | {rows[0]['index_build_s'] * 1000:.0f} |"
                  "  |  |  |")


if __name__ == "__main__":
    main()
