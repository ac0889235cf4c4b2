"""The offline report's range op table (static/js/sources.js SnapshotSource.ops, run under Node) gives
load_ops_in_range's rows for the same ranges and views, on the trace with recursive frames f -> g -> f
(a kernel counted once per row), including ranges that hold only the inner f."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from explorer.analysis.timeline.index import build_timeline_index
from explorer.config import PROJECT_ROOT
from explorer.report.snapshot import snapshot_rules
from explorer.runs.ingest import ingest_paths
from explorer.store.run_queries import load_ops_in_range
from explorer.store.runs import RunStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kineto_recursive_frames.json"
FIELDS = ("name", "calls", "cpu_total_ns", "self_cpu_ns", "self_device_ns", "device_total_ns", "cpu_avg_ns")
RUN_JS = """
global.window = {}; require(process.argv[1]);
const [snap, cases] = JSON.parse(require("fs").readFileSync(0, "utf8"));
const src = new window.TE.SnapshotSource(snap);
Promise.all(cases.map(([a, b, view]) => src.ops(a, b, view))).then((r) => console.log(JSON.stringify(r.map((x) => x.rows))));
"""


def offline_ops(snap: dict[str, Any], cases: list[tuple[int, int, str]]) -> list[list[dict[str, Any]]]:
    out = subprocess.run(["node", "-e", RUN_JS, str(PROJECT_ROOT / "static" / "js" / "sources.js")],
                         input=json.dumps([snap, cases]), capture_output=True, text=True, check=True, timeout=60)
    result: list[list[dict[str, Any]]] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_offline_range_ops_equal_load_ops_in_range(store: RunStore) -> None:
    rec = ingest_paths(store, [FIXTURE])
    t = store.table
    origin = rec.summary.start_ns
    ix = build_timeline_index(t(rec.id, "slices"), t(rec.id, "tracks"), t(rec.id, "counters"), t(rec.id, "flows"),
                              origin, t(rec.id, "instants"))
    slices = t(rec.id, "slices").to_pylist()
    frames = sorted((s["ts_ns"] - origin, s["dur_ns"]) for s in slices if s["name"] == "model.py(10): f")
    assert len(frames) >= 2  # outer and inner f
    (outer_ts, outer_dur), (inner_ts, _) = frames[0], frames[1]
    span = rec.summary.span_ns
    ranges = [(0, span + 1), (inner_ts, outer_ts + outer_dur + 1), (outer_ts, inner_ts + 1), (0, span // 2)]
    cases = [(a, b, view) for a, b in ranges for view in ("all", "operators", "python")]
    snap = {"tracks": {"tracks": t(rec.id, "tracks").to_pylist()}, **snapshot_rules(store, rec.id, ix)}
    got = offline_ops(snap, cases)
    for (a, b, view), rows in zip(cases, got, strict=True):
        want = load_ops_in_range(store, rec.id, origin + a, origin + b, view=view, limit=200)
        assert [{k: r[k] for k in FIELDS} for r in rows] == [{k: r[k] for k in FIELDS} for r in want], (a, b, view)
    assert any(r["device_total_ns"] > 0 for rows in got for r in rows)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_offline_range_ops_keep_launch_sites(store: RunStore, tmp_path: Path) -> None:
    """A capture whose kernels were launched with no op around them (a Python frame, a bare runtime call): the
    offline range tables list the same launch sites as load_ops_in_range, a bare call only when it starts inside."""
    from tests.store.test_queries_op_attribution import flashinfer_like

    rec = ingest_paths(store, [flashinfer_like().write(tmp_path / "flashinfer_like.json")])
    t = store.table
    origin = rec.summary.start_ns
    ix = build_timeline_index(t(rec.id, "slices"), t(rec.id, "tracks"), t(rec.id, "counters"), t(rec.id, "flows"),
                              origin, t(rec.id, "instants"))
    bare = next(s for s in t(rec.id, "slices").to_pylist() if s["name"] == "cudaLaunchKernel" and s["op_id"] < 0)
    at = bare["ts_ns"] - origin
    ranges = [(0, rec.summary.span_ns + 1), (at, at + 1), (0, at), (at + 1, rec.summary.span_ns + 1)]
    cases = [(a, b, view) for a, b in ranges for view in ("all", "operators", "python")]
    got = offline_ops({"tracks": {"tracks": t(rec.id, "tracks").to_pylist()}, **snapshot_rules(store, rec.id, ix)},
                      cases)
    for (a, b, view), rows in zip(cases, got, strict=True):
        want = load_ops_in_range(store, rec.id, origin + a, origin + b, view=view, limit=200)
        assert [{k: r[k] for k in FIELDS} for r in rows] == [{k: r[k] for k in FIELDS} for r in want], (a, b, view)
        has_bare = any(r["name"] == "cudaLaunchKernel" for r in want)
        assert has_bare == (view != "python" and a <= at < b), (a, b, view)
