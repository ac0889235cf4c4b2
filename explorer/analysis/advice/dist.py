"""Distributed and device rules: exposed communication and stragglers from the per-rank summary
(explorer.analysis.ranks), and the Neuron device recommendations (explorer.analysis.device.advice) in the
finding shape. The Neuron rules measure ratios, not time, so their findings carry no saving."""

from __future__ import annotations

from explorer.analysis.advice.finding import Context, fact, make_finding, page_link
from explorer.model.advice_shapes import Finding
from explorer.model.device_shapes import RecommendationJson
from explorer.model.shapes import RanksResult

EXPOSED_MIN_DEN = 20  # exposed communication of at least 1/20 of the worst rank's window
PPM = 1_000_000


def exposed_comm(ctx: Context, ranks: RanksResult) -> list[Finding]:
    rows = [r for r in ranks["ranks"] if r["mode"] == "device" and r["window_ns"]]
    if not rows:
        return []
    worst = max(rows, key=lambda r: (r["exposed_comm_ns"], -r["rank"]))
    exposed = worst["exposed_comm_ns"]
    if exposed * EXPOSED_MIN_DEN < worst["window_ns"]:
        return []
    free_compute = max(worst["compute_ns"] - worst["hidden_comm_ns"], 0)
    return [make_finding(
        ctx, "exposed-communication", f"Communication is exposed on rank {worst['rank']}: overlap it with compute",
        "Collectives run while no compute kernel runs on the device, so every rank waits for them.",
        [fact("exposed communication", exposed), fact("hidden (overlapped) communication", worst["hidden_comm_ns"]),
         fact("compute", worst["compute_ns"]), fact("window", worst["window_ns"])],
        [page_link(ctx, "ranks", "ranks", "ranks"), page_link(ctx, "collectives", "collectives", "collectives")],
        "Overlap gradient communication with the backward pass: DDP(bucket_cap_mb=...) / FSDP with prefetching "
        "(backward_prefetch, forward_prefetch), fewer larger buckets, and no synchronize between backward and "
        "the all-reduce.",
        min(exposed, free_compute), exposed,
        "min(exposed communication, compute not yet overlapping communication) on the worst rank: overlap can hide "
        "communication only behind compute", "medium", "medium")]


def stragglers(ctx: Context, ranks: RanksResult) -> list[Finding]:
    median = ranks["median_step_time_ns"]
    out = []
    for r in ranks["ranks"]:
        if not r["straggler"]:
            continue
        steps = max(len(r["steps"]), 1)
        # the others wait for it at every collective (its lateness), or its own step is longer than the median's
        late = min(max(r["step_time_ns"] - median, r["arrival_late_ns"], 0), r["step_time_ns"])
        ev = r["evidence"]
        why = f" ({ev['kind']} {ev['name']} takes {ev['excess_ns']} ns more than on rank {ev['reference_rank']})" \
            if ev is not None and ev["kind"] else ""
        out.append(make_finding(
            ctx, "straggler", f"Rank {r['rank']} is a straggler: the others wait for it",
            f"Rank {r['rank']}'s step is slower than the median rank's{why}; collectives make every rank wait for it.",
            [fact("its step time", r["step_time_ns"]), fact("median step time", median),
             fact("steps", steps, "count"), fact("arrives late to collectives by", r["arrival_late_ns"])],
            [page_link(ctx, "ranks", "ranks", "ranks"),
             {"kind": "ranks", "label": "compare with the median rank",
              "path": f"/runs/{ctx.run_id}/ranks/compare?a={r['rank']}"}],
            "Find what that rank does differently (its host, its data shard's sizes, a slower device or link): "
            "balance the data (same sequence lengths per rank), check its host for other load.",
            late * steps, r["step_time_ns"] * steps,
            "max(its step time − median step time, its median lateness to the collectives) × its steps (at most its "
            "step time each)", "medium", "large"))
    return out


EFFORT_BY_KEY = {"dma": "large", "engine": "large", "sbuf": "large", "spill": "large", "semaphore": "medium",
                 "throttl": "medium", "nki": "large", "collective": "medium"}


def neuron_findings(ctx: Context, profile: str, profile_id: str, recs: list[RecommendationJson]) -> list[Finding]:
    out = []
    for r in recs:
        effort = next((e for k, e in EFFORT_BY_KEY.items() if k in r["key"].lower()), "medium")
        subject = f" ({r['subject']})" if r["subject"] else ""
        unit = "bytes" if r["unit"] == "bytes" else "ppm"
        scale = 1 if unit == "bytes" else PPM
        out.append(make_finding(
            ctx, f"neuron:{r['key']}", f"{r['finding']}{subject}",
            f"Neuron device profile {profile}: the measure is past the Neuron Explorer's threshold.",
            [fact("measured", round(r["value"] * scale), unit), fact("threshold", round(r["threshold"] * scale), unit)],
            [{"kind": "device", "label": f"device profile {profile}", "path": f"/runs/{ctx.run_id}/device/{profile_id}"}],
            r["advice"], None, 0, "not timed: the rule measures a ratio of the device profile", "medium", effort))
    return out
