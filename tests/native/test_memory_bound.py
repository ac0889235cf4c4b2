"""The ingest keeps to `ingest_memory_mb`: a generated trace (bench/synth.py) ingested in a child process
under a low setting finishes within the setting plus the interpreter's own baseline plus the per-slice
columns held by design, below an unconstrained ingest's peak, and stores the same tables as that ingest
(which holds every arg in memory) — checked against an independent reading of the file too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from synth import BASE_NS, write_kineto_trace  # noqa: E402

pytestmark = pytest.mark.slow

EVENTS = 400_000  # ~84 MB, 267k slices: a trace bigger than the setting below, so every bounded path is taken
# (the args spilled as read: chrome_fast.SPILL_MIN_BYTES; put in slice order through bucket files on disk)
LOW_MB = 64  # the lowest setting (Settings.ingest_memory_mb ge=64)
# What stays in memory whatever the setting, per slice: the numeric columns, names / categories / shapes,
# the finished slices table, allocator slack (explorer.native.memory). Measured ~460 B (0.6-0.7 KB before
# freed memory was returned to the system).
PER_SLICE_BYTES = 640
TABLES = ("slices", "tracks", "flows", "counters", "instants", "op_stats", "op_stats_by_shape")

CHILD = r"""
import json, sys
from pathlib import Path
from explorer.native.memory import ingest_environment
ingest_environment()  # as the console script does for `ingest` (api/launch.py), before pyarrow loads
import duckdb, pyarrow.parquet  # noqa: F401 - the baseline is the interpreter with what an ingest imports
import explorer.analysis.op_stats  # noqa: F401
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.limits import IngestLimits
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

def status_kb(field):  # VmHWM, not getrusage's ru_maxrss: that one keeps the forking parent's (pytest's) peak
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

from explorer.native.memory import as_ingest_process
as_ingest_process()  # as `trace-explorer ingest` does
trace, data, memory_mb, hold = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "hold"
if hold:  # the unconstrained reference: every arg held in memory, DuckDB at the default budget
    chrome_fast.SPILL_MIN_BYTES = 1 << 62
base = status_kb("VmRSS")
store = RunStore(data)
rec = ingest_paths(store, [trace], "bound", limits=IngestLimits(memory_mb=memory_mb))
print(json.dumps({"status": rec.status, "dir": str(store.run_dir(rec.id)), "base_kb": base,
                  "peak_kb": status_kb("VmHWM")}))
"""


def ingest_in_child(trace: Path, data: Path, memory_mb: int, hold: bool) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(data), str(memory_mb),
                          "hold" if hold else "bounded"], check=True, capture_output=True, text=True, timeout=300)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def complete_events(trace: Path) -> list[dict[str, Any]]:
    """The file's complete events, read with the standard library (times kept as exact decimals)."""
    doc = json.loads(trace.read_text(), parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def ns(us: Decimal | int) -> int:
    return int(Decimal(us) * 1000) + BASE_NS


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("bound")
    trace = folder / "synthetic.json"
    size = write_kineto_trace(trace, EVENTS)
    bounded = ingest_in_child(trace, folder / "bounded", LOW_MB, hold=False)
    held = ingest_in_child(trace, folder / "held", 1500, hold=True)
    return {"trace": trace, "size": size, "bounded": bounded, "held": held}


def test_a_low_setting_finishes_with_the_same_tables(runs: dict[str, Any]) -> None:
    assert runs["size"] > LOW_MB * 2**20  # the trace does not fit the setting
    assert runs["bounded"]["status"] == runs["held"]["status"] == "ready"
    for name in TABLES:
        bounded = pq.read_table(Path(runs["bounded"]["dir"]) / f"{name}.parquet")
        held = pq.read_table(Path(runs["held"]["dir"]) / f"{name}.parquet")
        assert bounded.equals(held), name


def test_the_spilled_args_are_the_files_args_in_slice_order(runs: dict[str, Any]) -> None:
    slices = pq.read_table(Path(runs["bounded"]["dir"]) / "slices.parquet",
                           columns=["name", "ts_ns", "dur_ns", "args"]).to_pylist()
    stored = sorted((s["name"], s["ts_ns"], s["dur_ns"], json.dumps(json.loads(s["args"]), sort_keys=True))
                    for s in slices)
    expected = sorted((e["name"], ns(e["ts"]), int(Decimal(e["dur"]) * 1000),
                       json.dumps(e["args"], default=float, sort_keys=True))
                      for e in complete_events(runs["trace"]))
    assert len(stored) == len(expected) > EVENTS // 2
    assert stored == expected


def test_the_peak_stays_within_the_setting_plus_the_columns_held_by_design(runs: dict[str, Any]) -> None:
    bounded, held = runs["bounded"], runs["held"]
    slices = pq.ParquetFile(Path(bounded["dir"]) / "slices.parquet").metadata.num_rows
    over_kb = bounded["peak_kb"] - bounded["base_kb"]
    assert over_kb * 1024 <= LOW_MB * 2**20 + slices * PER_SLICE_BYTES, (over_kb, slices)
    assert bounded["peak_kb"] < held["peak_kb"], (bounded, held)
