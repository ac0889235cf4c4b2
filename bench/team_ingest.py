"""Team-server fan-out benchmark (issue 17): one run of N rank files of about M MB each (bench/synth_ranks.py)
ingested through the PostgreSQL job queue by 1, 2 and 4 `trace-explorer worker` processes, each count on a fresh
database and data folder (folder storage, as a shared mount would be). The run is enqueued as an upload would
be (explorer.runs.jobs.queue.IngestQueue.enqueue, the web process's own call) and timed until it is ready.

It prints, per worker count: the wall time, the parse phase (first job start to last parse job end), the merge
(one job: the same finish as an inline ingest, in one process), how many jobs each worker took, and the CPU
seconds of all workers per wall second (2.0 = both cores of this box busy).
Usage:
    .venv/bin/python bench/team_ingest.py [--files 64] [--mb 50] [--workers 1 2 4]
        [--pg postgresql://postgres@127.0.0.1:5432] [--dir /tmp/bench-team]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from synth_ranks import RankPlan, write_rank_traces  # noqa: E402

from explorer.config import Settings  # noqa: E402
from explorer.runs.jobs.queue import IngestQueue  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402

BYTES_PER_UNIT = 5_135  # bench/ranks_ingest.py: one unit of a synth_ranks file of 10 steps
STEPS = 10
TICK = os.sysconf("SC_CLK_TCK")


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from api.cli import main; main()", *args]


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds of these processes and their children (a worker's forkserver pool), from /proc."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime
    return total


def one_round(files: list[Path], workers: int, pg: str, folder: Path) -> dict[str, Any]:
    name = "bench_" + secrets.token_hex(5)
    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{pg}/{name}"
    data = folder / f"data-{workers}"
    shutil.rmtree(data, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "EXPLORER_CATALOG_URL": url}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(cli("db", "upgrade", "--data-dir", str(data)), env=env, check=True, capture_output=True)
        logs = []
        for i in range(workers):
            logs.append(folder / f"worker-{workers}-{i}.log")
            with logs[-1].open("wb") as out:
                procs.append(subprocess.Popen(cli("worker", "--data-dir", str(data)), env=env, stdout=out,
                                              stderr=subprocess.STDOUT))
        while not all("Starting worker on queues" in log.read_text() for log in logs):
            time.sleep(0.2)
        upload = data / "tmp" / "bench-upload"
        upload.mkdir(parents=True)
        for f in files:  # hard links: the enqueue moves the folder, the generated files stay
            os.link(f, upload / f.name)
        settings = Settings(data_dir=data, catalog_url=url, ingest_queue="postgres")
        store = RunStore.from_settings(settings)
        queue = IngestQueue(settings, store)
        cpu0 = tree_cpu_s([p.pid for p in procs])
        started = time.perf_counter()
        with queue.app.open():
            rec = store.catalog.create(f"{len(files)} files, {workers} workers")
            queue.enqueue(rec.id, upload, sorted(upload.iterdir()))
        while (status := store.get(rec.id).status) not in ("ready", "failed"):
            time.sleep(0.2)
        wall = time.perf_counter() - started
        cpu = tree_cpu_s([p.pid for p in procs]) - cpu0
        if status != "ready":
            raise SystemExit(f"the run failed: {store.get(rec.id).message}")
        slices = store.get(rec.id).summary.slices
        store.catalog.close()
        print(f"  {workers} workers: ready after {wall:.1f} s", flush=True)
        with psycopg.connect(url, row_factory=dict_row) as conn:
            while conn.execute("SELECT count(*) AS n FROM procrastinate_jobs WHERE status::text IN ('todo', 'doing')"
                               ).fetchone()["n"]:  # type: ignore[index]
                time.sleep(0.2)  # the run is ready a moment before its merge job is marked done
            events = conn.execute(
                "SELECT j.task_name, e.type::text AS type, extract(epoch FROM e.at) AS at FROM procrastinate_events e "
                "JOIN procrastinate_jobs j ON j.id = e.job_id WHERE e.type IN ('started', 'succeeded')").fetchall()
        at: dict[tuple[str, str], list[float]] = {(e["task_name"], e["type"]): [] for e in events}
        for e in events:
            at[(e["task_name"], e["type"])].append(float(e["at"]))
        first = min(at[("explorer.ingest", "started")])
        return {"workers": workers, "wall_s": wall, "slices": slices,
                "parse_s": max(at[("explorer.parse", "succeeded")]) - first,
                "merge_s": max(at[("explorer.merge", "succeeded")]) - min(at[("explorer.merge", "started")]),
                "cpu_per_wall": cpu / wall,
                "jobs_per_worker": sorted(len(re.findall(r"took job", log.read_text())) for log in logs)}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/bench-team"))
    args = ap.parse_args()
    units = max(1, int(args.mb * 1e6 / BYTES_PER_UNIT))
    plan = RankPlan(world=args.files, steps=STEPS, units=units, late_rank=args.files // 2, late_ns=units * 40_000)
    traces = args.dir / f"traces-{args.files}x{args.mb:g}"
    if not traces.is_dir() or len(list(traces.glob("*.json"))) != args.files:
        shutil.rmtree(traces, ignore_errors=True)
        print(f"writing {args.files} rank files of ~{args.mb:g} MB to {traces} ...", flush=True)
        write_rank_traces(traces, plan)
    files = sorted(traces.glob("*.json"))
    total_mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"{len(files)} files, {total_mb:,.0f} MB; {os.cpu_count()} CPU cores; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'workers':>7} {'wall s':>8} {'MB/s':>6} {'parse s':>8} {'merge s':>8} {'CPU/wall':>8}  jobs per worker")
    rows = []
    for n in args.workers:
        row = one_round(files, n, args.pg, args.dir)
        rows.append(row)
        print(f"{n:>7} {row['wall_s']:>8.1f} {total_mb / row['wall_s']:>6.1f} {row['parse_s']:>8.1f} "
              f"{row['merge_s']:>8.1f} {row['cpu_per_wall']:>8.2f}  {row['jobs_per_worker']}", flush=True)
    base = rows[0]["wall_s"]
    print("speed-up vs the first: " + ", ".join(f"{r['workers']} workers {base / r['wall_s']:.2f}x" for r in rows))
    print(f"slices in the run: {rows[0]['slices']:,}; load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
