"""Every real Chrome/Kineto trace in ../shared/traces ingests, and what it stores adds up.

Counts are checked against an independent reading of each file (plain json + a B/E stack), not
against the parser itself. Skips when ../shared is absent (a user's clone has none).
"""

from __future__ import annotations

import gzip
import json
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from explorer.errors import BadTrace
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from explorer.model.tables import IngestedTrace
from tests.helpers.parsers import use_parser

pytestmark = [pytest.mark.shared, pytest.mark.slow]
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
NOT_TIMELINES = {"benchmark_simple_add_et.json.gz": "execution trace"}
# export_memory_timeline's raw output: no timeline, its [ts, action, bytes, category] rows kept for the memory page
MEMORY_TIMELINES = {"memory_timeline.raw.gz"}
GPU_CATEGORIES = {"kernel", "Kernel", "mtia_ccp_events"}


def trace_files() -> list[Path]:
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name != "INDEX.md")


def load_events(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            raw = zf.read(zf.namelist()[0])
    else:
        raw = gzip.decompress(path.read_bytes()) if path.read_bytes()[:2] == b"\x1f\x8b" else path.read_bytes()
    text = raw.decode().strip()
    if text.startswith("[") and not text.endswith("]"):
        text = text.rstrip(",\n\t ") + "]"
    doc = json.loads(text)
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    return [e for e in events if isinstance(e, dict)]


def is_number(value: Any) -> bool:
    try:
        return value is not None and not isinstance(value, bool) and float(value) == float(value)
    except (TypeError, ValueError):
        return False


def expected_slices(events: list[dict[str, Any]]) -> int:
    """Complete X events plus B/E pairs matched per thread in time order."""
    x = sum(1 for e in events if e.get("ph") == "X" and is_number(e.get("ts")))
    per_thread: dict[tuple[str, str], list[tuple[float, int, str]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") in ("B", "E") and is_number(e.get("ts")):
            per_thread[(str(e.get("pid")), str(e.get("tid")))].append((float(e["ts"]), i, e["ph"]))
    pairs = 0
    for items in per_thread.values():
        depth = 0
        for _ts, _i, ph in sorted(items):
            if ph == "B":
                depth += 1
            elif depth:
                depth -= 1
                pairs += 1
    return x + pairs


def ingest(path: Path, tmp_path: Path) -> IngestedTrace:
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        return ingest_inputs(inputs)
    finally:
        inputs.cleanup()


def non_async_slices(trace: IngestedTrace) -> int:
    tracks = trace.tables["tracks"].to_pylist()
    async_tracks = {t["track_id"] for t in tracks if str(t["thread"]).startswith("async")}
    track = trace.tables["slices"].column("track_id").to_numpy()
    return int((~np.isin(track, list(async_tracks))).sum())


@pytest.mark.parametrize("path", trace_files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_real_trace_ingests_and_counts_match(path: Path, tmp_path: Path) -> None:
    if path.name in NOT_TIMELINES:
        with pytest.raises(BadTrace) as err:
            ingest(path, tmp_path)
        assert NOT_TIMELINES[path.name] in err.value.message and path.name.removesuffix(".gz") in err.value.message
        return
    trace = ingest(path, tmp_path)
    if path.name in MEMORY_TIMELINES:
        rows = json.loads(gzip.decompress(path.read_bytes()))
        assert trace.tables["memory_categories"].num_rows == len(rows) and trace.tables["slices"].num_rows == 0
        return
    events = load_events(path)
    assert non_async_slices(trace) == expected_slices(events)

    cats = {e.get("cat") for e in events}
    if cats & GPU_CATEGORIES:
        slices = trace.tables["slices"].to_pydict()
        lane_of_cat: dict[str, set[str]] = defaultdict(set)
        for cat, lane in zip(slices["cat"], slices["lane"], strict=True):
            lane_of_cat[cat].add(lane)
        for cat in cats & GPU_CATEGORIES:
            assert lane_of_cat[cat] == {"hardware"}, cat
        for cat in cats & {"cuda_runtime", "Runtime", "mtia_runtime", "cuda_driver"}:
            assert lane_of_cat[cat] == {"runtime"}, cat
        dev = np.asarray(slices["device_time"])
        dur = np.asarray(slices["dur_ns"])
        op = np.asarray(slices["op_id"])
        total = int(dur[dev].sum())
        attributed = int(dur[dev & (op >= 0)].sum())
        # executions no op launched but a runtime call did (an execute flow): rows of their own in the op table
        flows = trace.tables["flows"].to_pydict()
        lane = slices["lane"]
        bare = {b for a, b, k in zip(flows["from_slice"], flows["to_slice"], flows["kind"], strict=True)
                if k == "execute" and lane[a] == "runtime" and dev[b] and op[b] < 0}
        launched = attributed + sum(int(dur[b]) for b in bare)
        op_rows = trace.tables["op_stats"].to_pydict()
        # what the op table attributes (self device time over all rows) plus what no launch accounts for = all
        assert sum(op_rows["self_device_ns"]) + (total - launched) == total
        if cats & {"cuda_runtime", "Runtime", "mtia_runtime"} and cats & {"cpu_op", "Operator"}:
            assert attributed > 0, "device executions should trace back to framework ops"
            assert "execute" in set(trace.tables["flows"].column("kind").to_pylist())


MEDIUM = ["HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz",
          "HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"]


@pytest.mark.parametrize("fast_path", ["native", "native-pieces", "duckdb"])
@pytest.mark.parametrize("rel", MEDIUM)
def test_fast_and_small_file_paths_agree(rel: str, fast_path: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Every table the same; the args' text too on the compiled reader (DuckDB's writes it again, compact)."""
    if not SHARED.is_dir():
        pytest.skip("../shared/traces is absent")
    path = SHARED / rel
    use_parser(monkeypatch, fast_path)
    monkeypatch.setattr(chrome_fast, "NATIVE_PIECE_BYTES", 2**20 if fast_path == "native-pieces" else 8 * 2**20)
    monkeypatch.setattr(chrome_fast, "BATCH_ROWS", 4096)  # many batches: flows pair across their borders
    fast = ingest(path, tmp_path)
    use_parser(monkeypatch, "msgspec")
    small = ingest(path, tmp_path)
    for name in ("slices", "flows", "op_stats", "op_stats_by_shape", "tracks", "counters", "instants"):
        a, b = fast.tables[name], small.tables[name]
        if name == "slices" and fast_path == "duckdb":
            a, b = a.drop_columns(["args"]), b.drop_columns(["args"])
        assert a.equals(b), name
