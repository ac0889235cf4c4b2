"""Multi-file ingest benchmark (issue 15's "several files in one run" target): N synthetic rank files of about
M MB each (bench/synth_ranks.py), ingested three ways, alternating, each in a fresh subprocess:

  singles     every file its own run, one after another (`ingest_paths([f])` N times)
  one run, 1  all files one run, parsed in the ingest's process (`ingest_processes` = 1)
  one run, P  all files one run, P files parsed at once: the ingest's process and P - 1 threads of it
              (explorer/ingest/parallel.py, the default `ingest_parse_in`)
  P procs     the same with P - 1 worker processes instead of threads (`ingest_parse_in = processes`)

It prints each round's seconds, the medians, the ratios (target: one run, P <= 0.6 x singles) and where the
time goes (parse / finish / hash and write), the finish's own CPU seconds (steady on a loaded box, where wall
times are not), the run's CPU seconds (all its processes) and per wall second (2.0 = both cores busy).
Usage:
    .venv/bin/python bench/ranks_ingest.py [--ranks 8] [--mb 50] [--rounds 3] [--processes 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth_ranks import RankPlan, write_rank_traces  # noqa: E402

BYTES_PER_UNIT = 5_135  # one unit (cpu op + launch + kernel per step, 10 steps) of a synth_ranks file, measured
STEPS = 10

# The child times the whole ingest and, by wrapping two functions, its parts: ingest_inputs (parse, merge,
# finish) and TraceBuilder.finish; the rest of ingest_paths is hashing the inputs and writing the run. Its CPU
# seconds are its own and its descendants' (the pool's workers are the forkserver's children, which no wait()
# reports): read from /proc every 0.1 s, the last reading of each process kept.
CHILD = r"""
import json, os, sys, tempfile, threading, time
from pathlib import Path
TICK = os.sysconf("SC_CLK_TCK")
def tree_cpu(seen):
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)
    mine = {os.getpid()}
    for _ in range(4):  # the workers are 3 levels down: this process -> forkserver -> worker
        mine |= {pid for pid, (ppid, _cpu) in stats.items() if ppid in mine}
    seen.update({pid: stats[pid][1] for pid in mine if pid in stats})
seen, stop = {}, threading.Event()
def sample():
    while not stop.wait(0.1):
        tree_cpu(seen)
threading.Thread(target=sample, daemon=True).start()
from explorer.native.memory import as_ingest_process, ingest_environment
ingest_environment()  # as the console script does for `ingest` (api/launch.py), before pyarrow loads
as_ingest_process()  # as `trace-explorer ingest` does, before the ingest's imports
import explorer.ingest.builder as builder
import explorer.runs.ingest as service
from explorer.ingest.limits import IngestLimits
from explorer.store.runs import RunStore
spent = {"ingest_inputs": 0.0, "finish": 0.0, "finish_cpu": 0.0}
def timed(key, fn):
    def run(*a, **k):
        t, c = time.perf_counter(), time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            spent[key] += time.perf_counter() - t
            if key == "finish":  # finish() runs in this thread: its CPU seconds, whatever else loads the box
                spent["finish_cpu"] += time.thread_time() - c
    return run
builder.TraceBuilder.finish = timed("finish", builder.TraceBuilder.finish)
service.ingest_inputs = timed("ingest_inputs", service.ingest_inputs)
mode, processes, parse_in, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3], [Path(p) for p in sys.argv[4:]]
limits = IngestLimits(processes=processes, parse_in=parse_in)
with tempfile.TemporaryDirectory() as data:
    store = RunStore(Path(data))
    tree_cpu(seen)
    c0, t0 = sum(seen.values()), time.perf_counter()
    runs = [[p] for p in paths] if mode == "singles" else [paths]
    slices = sum(service.ingest_paths(store, r, limits=limits).summary.slices for r in runs)
    wall = time.perf_counter() - t0
    tree_cpu(seen)
    stop.set()
cpu = sum(seen.values()) - c0
print(json.dumps({"seconds": wall, "cpu": cpu, "slices": slices, **spent}))
"""

# (name, processes (0: --processes), where the other parsers run)
MODES = (("singles", 1, "threads"), ("one run, 1", 1, "threads"), ("one run, P", 0, "threads"),
         ("P procs", 0, "processes"))


def child(mode: str, processes: int, parse_in: str, paths: list[Path]) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(processes), parse_in, *map(str, paths)],
                          check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mb", type=float, default=50, help="size of each rank file (about)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    units = max(1, int(args.mb * 1e6 / BYTES_PER_UNIT))
    plan = RankPlan(world=args.ranks, steps=STEPS, units=units, late_rank=args.ranks // 2, late_ns=units * 40_000)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        paths = write_rank_traces(Path(tmp) / "traces", plan)
        size = sum(p.stat().st_size for p in paths)
        print(f"wrote {args.ranks} rank files, {size / 1e6:.0f} MB, in {time.perf_counter() - t:.1f} s", flush=True)
        results: dict[str, list[dict[str, float]]] = {mode: [] for mode, _, _ in MODES}
        for rnd in range(args.rounds):
            for mode, processes, parse_in in MODES:
                res = child(mode, processes or args.processes, parse_in, paths)
                results[mode].append(res)
                print(f"round {rnd + 1}  {mode:<11} {res['seconds']:6.2f} s  (parse+merge "
                      f"{res['ingest_inputs'] - res['finish']:5.2f}, finish {res['finish']:5.2f} [{res['finish_cpu']:5.2f} "
                      f"CPU s], hash+write {res['seconds'] - res['ingest_inputs']:5.2f}; {res['cpu']:.1f} CPU s, "
                      f"{res['cpu'] / res['seconds']:.2f} per s; {int(res['slices']):,} slices)", flush=True)
        med = {mode: statistics.median(r["seconds"] for r in rs) for mode, rs in results.items()}
        print(f"medians: singles {med['singles']:.2f} s, one run (1 at a time) {med['one run, 1']:.2f} s, "
              f"one run ({args.processes} at once, threads) {med['one run, P']:.2f} s, "
              f"({args.processes} at once, processes) {med['P procs']:.2f} s")
        print(f"ratio one run ({args.processes} at once) / singles: {med['one run, P'] / med['singles']:.2f} "
              f"(target <= 0.60); / one run (1 at a time): {med['one run, P'] / med['one run, 1']:.2f}; "
              f"with processes / singles: {med['P procs'] / med['singles']:.2f}")


if __name__ == "__main__":
    main()
