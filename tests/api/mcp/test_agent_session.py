"""A scripted agent session: the fixed sequence of tool calls docs/agents.md prescribes, answering "where does device
time go and what should I fix", on the demo's RMSNorm runs (profiled here on CPU with explorer/demo.py's own
functions) and on a real A100 trace of ../shared/traces. Each answer is checked against a reading of the trace
file itself (json + Decimal) or torch's key_averages(), not against the product's functions."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.api.mcp.conftest import GPU_TRACE, call, run_session
from tests.helpers.span_traces import union_ns

pytestmark = pytest.mark.slow


def ns(us: Any) -> int:
    return int(Decimal(str(us)) * 1000)


def events(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    found: list[dict[str, Any]] = doc["traceEvents"]
    return [e for e in found if e.get("ph") == "X"]


def server_over(tmp: Path, traces: dict[str, Path]) -> tuple[Any, dict[str, str]]:
    from api.app import create_app
    from api.mcp.registry import build_server
    from explorer.config import Settings
    from explorer.runs.ingest import ingest_paths

    state = create_app(Settings(data_dir=tmp / "data")).state.explorer
    ids = {name: ingest_paths(state.store, [path], name).id for name, path in traces.items()}
    return build_server(state, local=False), ids


def test_gpu_session_finds_where_device_time_goes_and_what_to_fix(tmp_path: Path, shared_traces: Path) -> None:
    trace = shared_traces / GPU_TRACE
    server, ids = server_over(tmp_path, {"alexnet": trace})

    async def session(client: Any) -> dict[str, Any]:
        runs = await call(client, "list_runs", name="alexnet")
        run = runs["runs"][0]["id"]
        gaps = await call(client, "gaps", run=run, limit=5)
        kernels = await call(client, "kernels", run=run, limit=5)
        ops = await call(client, "ops", run=run, limit=5)
        top = await call(client, "search", run=run, q=kernels["rows"][0]["name"], limit=1)
        chain = await call(client, "chain", run=run, slice_id=top["matches"][0]["slice_id"])
        report = (await client.read_resource(f"run://{run}/report.md")).contents[0].text
        return {"run": run, "gaps": gaps, "kernels": kernels, "ops": ops, "chain": chain, "report": report}

    got = run_session(lambda: server, session)
    assert got["run"] == ids["alexnet"]
    raw = events(trace)
    device = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    busy = union_ns([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in device])
    # 1. is the device busy? No: about 0.15 % of the span; the gaps are host-bound
    (gpu,) = got["gaps"]["devices"]
    assert gpu["busy_ns"] == busy and gpu["busy_pct"] < 1
    assert got["gaps"]["gaps"]["largest"][0]["cause"] == "host busy"
    # 2. where its time goes: pageable host-to-device copies, 84 % of device time
    by_name: Counter[str] = Counter()
    for e in device:
        by_name[e["name"]] += ns(e["dur"])
    name, total = by_name.most_common(1)[0]
    first = got["kernels"]["rows"][0]
    assert (first["name"], first["total_ns"]) == (name, total) == ("Memcpy HtoD (Pageable -> Device)", 55_503_000)
    assert first["device_pct"] == pytest.approx(100 * total / sum(by_name.values()), abs=0.01)
    # 3. what to fix: the op that issues them (aten::copy_, from .to()), found in the op table and in the chain
    assert got["ops"]["rows"][0]["name"] == "aten::copy_" and got["ops"]["rows"][0]["self_device_ns"] == total
    assert "aten::copy_" in {c["name"] for c in got["chain"]["chain"]}
    assert all(len(a["rows"]) <= 5 for a in (got["kernels"], got["ops"]))
    # the report an agent can read whole says the same: the busy time and the top kernel's row
    assert f"| GPU 0 | {got['gaps']['devices'][0]['busy_human']} |" in got["report"]
    assert "| `Memcpy HtoD (Pageable -> Device)` | 16 | 55.503 ms |" in got["report"]


def test_demo_session_on_the_rmsnorm_runs(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import profile

    from explorer.demo import profile_variant, rmsnorm_fused, rmsnorm_naive
    from explorer.model.demo import ACTIVE_STEPS, FUSED, NAIVE, RUN_NAMES

    torch.set_num_threads(1)
    x, w = torch.randn(4, 64, 256), torch.ones(256)
    paths = {RUN_NAMES[k]: profile_variant(torch, fn, x, w, "cpu", tmp_path / f"{k}.json")
             for k, fn in ((NAIVE, rmsnorm_naive), (FUSED, rmsnorm_fused))}
    with profile() as prof:  # the independent count of the naive variant's ops per call
        rmsnorm_naive(x, w)
    per_call = {e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")}
    server, ids = server_over(tmp_path, paths)
    naive, fused = ids[RUN_NAMES[NAIVE]], ids[RUN_NAMES[FUSED]]

    async def session(client: Any) -> dict[str, Any]:
        return {"summary": await call(client, "run_summary", run=naive),
                "gaps": await call(client, "gaps", run=naive),
                "ops": await call(client, "ops", run=naive, limit=50),
                "steps": await call(client, "steps", run=naive),
                "fused_ops": await call(client, "ops", run=fused, limit=50),
                "better": await call(client, "check", baseline=naive, candidate=fused, metric=["step_time"]),
                "worse": await call(client, "check", baseline=fused, candidate=naive, metric=["step_time"])}

    got = run_session(lambda: server, session)
    raw = {name: events(path) for name, path in paths.items()}
    # 1. no device here: CPU only, so the question becomes where CPU time goes
    assert got["summary"]["summary"]["slices_per_lane"].get("hardware", 0) == 0 and got["gaps"]["devices"] == []
    # 2. the naive variant's ops: calls as key_averages() counts them per call, CPU totals from the trace file
    rows = {r["name"]: r for r in got["ops"]["rows"]}
    for op, count in per_call.items():
        assert rows[op]["calls"] == count * ACTIVE_STEPS, op
        # an op inside an op of its own name (aten::div_ in aten::div_) counts once: the union of its intervals
        mine = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in raw[RUN_NAMES[NAIVE]] if e["name"] == op]
        assert rows[op]["cpu_total_ns"] == union_ns(mine), op
    # 3. steps: ACTIVE_STEPS of them, their durations the trace's ProfilerStep# slices
    steps = [ns(e["dur"]) for e in raw[RUN_NAMES[NAIVE]] if e["name"].startswith("ProfilerStep#")]
    assert [s["dur_ns"] for s in got["steps"]["steps"]] == steps and len(steps) == ACTIVE_STEPS
    # 4. what to fix: the gate's step time is the mean ProfilerStep# duration of each run, read from the files
    fused_steps = [ns(e["dur"]) for e in raw[RUN_NAMES[FUSED]] if e["name"].startswith("ProfilerStep#")]
    for result, base, cand in ((got["better"], steps, fused_steps), (got["worse"], fused_steps, steps)):
        (row,) = result["rows"]
        assert row["metric"] == "step_time"
        assert abs(row["baseline_ns"] - sum(base) / len(base)) <= 1 and abs(row["candidate_ns"] - sum(cand) / len(cand)) <= 1
        assert result["passed"] is (row["candidate_ns"] <= row["baseline_ns"] * 1.05)
    # the fix: the naive variant's elementwise ops, one pass over memory each, become one fused op (wall times on a
    # shared CPU are too noisy to rank the two here; the gate's numbers are checked above, whichever way they fall)
    fused_rows = {r["name"]: r["calls"] for r in got["fused_ops"]["rows"]}
    assert fused_rows.get("aten::rms_norm") == ACTIVE_STEPS
    assert sum(per_call.values()) >= 5 and not set(per_call) - set(rows)
    assert json.dumps(got)  # every answer is JSON text
