"""The advisor on every real trace of ../shared/traces: it never fails, no finding claims a saving larger than the
time it acts on, a unfused-chain or attention finding acts on no more than the op time it read (recomputed here
from the run's op events), and every evidence link is a path of this run."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.advice import compute_run_advice

pytestmark = pytest.mark.slow
NOT_TRACES = ("memory_timeline.raw", "_et.json")  # not Chrome traces (INDEX.md)


def real_traces(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".gz")
                  and not any(n in p.name for n in NOT_TRACES))


DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
OP_CATS = {"cpu_op", "Operator"}


def total_ns(path: Path, cats: set[str]) -> int:
    """Σ dur of the complete events of these categories, in ns, read with plain json + decimal (µs units)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(raw, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return int(sum((Decimal(e.get("dur", 0)) * 1000 for e in events
                    if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in cats), Decimal(0)))


def test_no_finding_claims_more_than_it_acts_on(shared_traces: Path, store: RunStore) -> None:
    seen = 0
    for path in real_traces(shared_traces):
        rec = ingest_paths(store, [path])
        if rec.status != "ready":
            continue
        advice = compute_run_advice(Run.of(store, rec.id))
        for f in advice["findings"]:
            assert f["saving_ns"] is None or 0 <= f["saving_ns"] <= f["acts_on_ns"], (path.name, f["rule"])
            assert all(e["path"].startswith(f"/runs/{rec.id}/") for e in f["evidence"]), (path.name, f["rule"])
        fusion = [f for f in advice["findings"] if f["rule"] in ("unfused-elementwise", "unfused-attention")]
        if fusion:  # the ops it read are device executions (device basis) or cpu_op slices (CPU basis)
            bound = total_ns(path, DEVICE_CATS if advice["time_basis"] == "device" else OP_CATS)
            assert sum(f["acts_on_ns"] for f in fusion) <= bound * 1001 // 1000, path.name  # µs rounding
        seen += len(advice["findings"])
        ranked = [f["saving_ns"] for f in advice["findings"] if f["saving_ns"] is not None]
        assert ranked == sorted(ranked, reverse=True), path.name
    assert seen > 20  # the GPU traces of HolisticTraceAnalysis and kineto fire rules


def test_rates_from_shapes_never_pass_the_peak(shared_traces: Path, store: RunStore) -> None:
    """On every real trace the ops' and kernels' achieved rates (explorer.views.rates) are below the device's peak
    (a rate above it would be a wrong FLOP or byte count, or time attributed to the wrong op), each op row's work
    covers all its calls, and a kernel's covers no more than its calls and time."""
    from explorer.views.kernels import compute_run_kernels
    from explorer.views.ops import compute_run_ops

    shown = 0
    for path in real_traces(shared_traces):
        rec = ingest_paths(store, [path])
        if rec.status != "ready":
            continue
        ops = compute_run_ops(Run.of(store, rec.id))
        for r in ops["rows"]:
            w = r.get("work")
            if w is not None:
                assert w["calls"] == r["calls"] and w["time_ns"] > 0, (path.name, r["name"])
                assert w["pct_of_peak"] is None or w["pct_of_peak"] <= 100, (path.name, r["name"], w)
                shown += w["pct_of_peak"] is not None
        for k in compute_run_kernels(Run.of(store, rec.id))["rows"]:
            w = k.get("work")
            if w is not None:
                assert w["calls"] <= k["calls"] and 0 < w["time_ns"] <= k["total_ns"], (path.name, k["name"])
                assert w["pct_of_peak"] is None or w["pct_of_peak"] <= 100, (path.name, k["name"], w)
                shown += w["pct_of_peak"] is not None
    assert shown > 10  # the A100 traces of HolisticTraceAnalysis record shapes
