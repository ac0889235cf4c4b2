"""Host-side rules: the device waiting on a busy host (gaps with host evidence), on kernel launches, on
synchronisation points; pageable host<->device copies; DataLoader stalls. Each reads the run's cached slice
columns, flows and breakdown; the gap causes are explorer.analysis.gap_evidence's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.advice.finding import Context, fact, make_finding, page_link, timeline_link
from explorer.analysis.advice.warmup import Warmup
from explorer.analysis.gap_evidence import covers_most
from explorer.model.advice_shapes import Evidence, Finding
from explorer.model.lanes import Lane
from explorer.model.shapes import Breakdown, Gap, KernelRow

I64 = np.int64
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "hipStreamSynchronize",
              "hipDeviceSynchronize", "cuStreamSynchronize", "cuCtxSynchronize")
DATALOADER_PREFIX = "enumerate(DataLoader)"
PAGEABLE = "Pageable"
# Pinned (page-locked) copies run at about twice the bandwidth of pageable ones, which the driver stages through
# a pinned buffer (NVIDIA, "How to Optimize Data Transfers in CUDA C/C++"): half the copy time is the saving taken.
PINNED_SPEEDUP_DEN = 2
LAUNCH_BOUND_MIN_SHARE_DEN = 2  # at least half the executions shorter than their launch call
LAUNCH_BOUND_MIN_COUNT = 10
# a launch call longer than this many times the run's median launch is blocked on something else (a module loaded
# lazily on a kernel's first launch, a full launch queue): only this much of it counts as launch overhead
LAUNCH_CAP_MEDIANS = 4
HOST_BOUND_MIN_DEN = 20  # host-busy gaps of at least 1/20 of the span


def _mask(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), bool)


def _gap_links(ctx: Context, gaps: list[Gap]) -> list[Evidence]:
    return [{"kind": "gaps", "label": f"gap {n + 1}: {g['cause_detail']}",
             "path": f"/runs/{ctx.run_id}/timeline?{g['timeline']['query']}"} for n, g in enumerate(gaps[:3])]


def _loader_gap(g: Gap) -> bool:
    """A gap the host spent fetching a batch: the DataLoader rule's time, not counted twice."""
    return g["top_activity"] is not None and any(a["name"].startswith(DATALOADER_PREFIX) for a in g["host_activity"]
                                                 if covers_most(a["covered_ns"], g["dur_ns"]))


def host_bound(ctx: Context, bd: Breakdown, warmup: Warmup | None = None) -> list[Finding]:
    """Gaps whose cause is host busy, but those the DataLoader explains and those inside a warm-up call (the
    steady state does not repeat them: explorer.analysis.advice.warmup)."""
    gaps = [g for g in bd["gaps"]["largest"] if g["cause"] == "host busy" and not _loader_gap(g)
            and not (warmup is not None and warmup.covers(g["start"], g["end"], g["rank"]))]
    busy = sum(g["dur_ns"] for g in gaps)
    if not gaps or busy * HOST_BOUND_MIN_DEN < ctx.span_ns:
        return []
    covered: dict[str, int] = {}
    for g in gaps:
        if g["top_activity"] is not None:
            covered[g["top_activity"]["name"]] = covered.get(g["top_activity"]["name"], 0) + g["dur_ns"]
    top = min(covered, key=lambda k: (-covered[k], k)) if covered else "host work"
    gaps = sorted(gaps, key=lambda g: (g["top_activity"] is None or g["top_activity"]["name"] != top, -g["dur_ns"]))
    fix = (f"The device waits while the host runs {top}. Move that work out of the step (precompute it, run it in "
           "DataLoader workers with num_workers > 0, or overlap it on another thread), or cut the host's per-op "
           "cost with torch.compile / CUDA graphs.")
    return [make_finding(
        ctx, "host-bound", f"The device idles while the host is busy in {top}",
        f"Device gaps are explained by host work; {top} covers the most of them (gaps the DataLoader explains are "
        "the DataLoader finding's).",
        [fact("gaps with the host busy", len(gaps), "count"), fact("their device idle time", busy),
         fact("all device idle between executions", bd["gaps"]["total_ns"])],
        _gap_links(ctx, gaps), fix, busy, bd["gaps"]["total_ns"],
        "sum of the listed gaps whose cause is `host busy` (the 20 largest gaps are explained, so this is a "
        "lower bound of the idle time host work causes)", "medium", "medium")]


def launch_bound(ctx: Context, slices: pa.Table, flows: pa.Table, bd: Breakdown) -> list[Finding]:
    """Executions whose launching runtime call (execute flows) outlasted everything it launched, on a device idle
    at least 1/20 of the span between executions. Each launch call counts once (a CUDA/HIP graph launch starts
    many kernels), and at most LAUNCH_CAP_MEDIANS times the run's median launch: beyond that the call waited on
    something that is not launch overhead."""
    execute = np.asarray(pc.equal(flows.column("kind"), "execute").to_numpy(zero_copy_only=False), bool)
    frm = flows.column("from_slice").to_numpy().astype(I64)[execute]
    to = flows.column("to_slice").to_numpy().astype(I64)[execute]
    n = slices.num_rows
    ok = (frm >= 0) & (frm < n) & (to >= 0) & (to < n)
    frm, to = frm[ok], to[ok]
    dev = _mask(slices.column("device_time"))
    frm, to = frm[dev[to]], to[dev[to]]
    if not len(to):
        return []
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    calls, which = np.unique(frm, return_inverse=True)
    launched = np.zeros(len(calls), I64)
    np.add.at(launched, which, dur[to])
    call_ns = dur[calls]
    short = launched < call_ns  # the call outlasted all it launched
    count = int(short[which].sum())
    if count < LAUNCH_BOUND_MIN_COUNT or count * LAUNCH_BOUND_MIN_SHARE_DEN < len(to):
        return []
    cap = LAUNCH_CAP_MEDIANS * int(np.median(call_ns))
    blocked = (call_ns > cap) & short  # the calls the saving counts at the cap
    excess = int(np.maximum(np.minimum(call_ns, cap) - launched, 0)[short].sum())
    idle = bd["gaps"]["total_ns"]
    if idle * HOST_BOUND_MIN_DEN < ctx.span_ns or excess == 0:  # a device busy 95 % of the span keeps up anyway
        return []
    facts = [fact("executions shorter than their launch", count, "count"), fact("executions", len(to), "count"),
             fact("launch calls", len(calls), "count"), fact("median launch call", int(np.median(call_ns))),
             fact("launch time beyond those executions' time", excess), fact("device idle between executions", idle)]
    if blocked.any():
        facts += [fact(f"launch calls over {LAUNCH_CAP_MEDIANS}× the median (lazy module loading, a full queue; "
                       "counted at the cap)", int(blocked.sum()), "count"),
                  fact("their time", int(call_ns[blocked].sum()))]
    return [make_finding(
        ctx, "launch-bound", "Most kernels are shorter than their launch: the device is launch-bound",
        "Most device executions take less time than the host call that launched them, so the device runs as "
        "fast as the host can launch: it is launch-bound.", facts,
        [page_link(ctx, "kernels", "kernels, shortest first", "kernels", sort="+avg_ns")],
        "Capture the steady-state step in a CUDA graph (torch.cuda.graphs / torch.compile(mode='reduce-overhead')),"
        " fuse small ops with torch.compile, or give each kernel more work (larger batch).",
        min(excess, idle), idle,
        f"min(Σ over the launch calls that outlast what they launched of (launch call time, at most {LAUNCH_CAP_MEDIANS}× "
        "the median launch call, − the time of the executions it launched), device idle time between executions): "
        "with the launches gone the device runs them back to back", "medium", "medium")]


def sync_points(ctx: Context, slices: pa.Table, bd: Breakdown, device: bool) -> list[Finding]:
    names = slices.column("name")
    ops = _mask(pc.is_in(names, pa.array(SYNC_OPS)))
    calls = _mask(pc.is_in(names, pa.array(SYNC_CALLS))) & _mask(pc.equal(slices.column("lane"), Lane.RUNTIME))
    parent = slices.column("parent_id").to_numpy().astype(I64)
    ok = (parent >= 0) & (parent < len(ops))
    outer = ops & ~(ok & ops[np.where(ok, parent, 0)])  # item, not the _local_scalar_dense inside it
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    n_ops, n_calls = int(outer.sum()), int(calls.sum())
    if not n_ops and not n_calls:
        return []
    host_ns = int(dur[outer].sum() + dur[calls].sum())
    if device:
        gaps = [g for g in bd["gaps"]["largest"] if g["cause"] == "synchronize"]
        saving, acts_on = sum(g["dur_ns"] for g in gaps), bd["gaps"]["total_ns"]
        formula = ("sum of the listed device gaps whose cause is `synchronize` (the device idles while the host "
                   "waits, then launches again)")
    else:
        gaps, saving, acts_on = [], host_ns, host_ns
        formula = "time in the outermost aten::item / _local_scalar_dense calls (no device: the calls are the cost)"
    if saving == 0:
        return []
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    first = int(np.flatnonzero(outer | calls)[0])
    links = _gap_links(ctx, gaps) or [timeline_link(ctx, "first sync point", int(ts[first]) - ctx.origin_ns,
                                                    int(ts[first] + dur[first]) - ctx.origin_ns)]
    return [make_finding(
        ctx, "sync-points", "Remove the synchronisation points from the loop",
        "The host stops to read a device value (.item(), a blocking copy) or waits for the device "
        "(…Synchronize), so it cannot queue the next work ahead.",
        [fact(".item() / _local_scalar_dense calls", n_ops, "count"), fact("synchronize calls", n_calls, "count"),
         fact("host time in them", host_ns)], links,
        "Keep values on the device inside the loop (accumulate a loss tensor, call .item() once after the loop or "
        "every N steps); drop explicit torch.cuda.synchronize(); use non_blocking=True copies.",
        saving, acts_on, formula, "medium", "small")]


def pageable_copies(ctx: Context, slices: pa.Table) -> list[Finding]:
    dev = _mask(slices.column("device_time"))
    pageable = dev & _mask(pc.match_substring(slices.column("name"), PAGEABLE))
    count = int(pageable.sum())
    if not count:
        return []
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    total = int(dur[pageable].sum())
    first = int(np.flatnonzero(pageable)[0])
    return [make_finding(
        ctx, "pageable-copies", "Pin host memory: host↔device copies are pageable",
        "Host↔device copies from pageable memory are staged by the driver and cannot overlap with compute.",
        [fact("pageable copies", count, "count"), fact("their device time", total)],
        [timeline_link(ctx, "first pageable copy", int(ts[first]) - ctx.origin_ns,
                       int(ts[first] + dur[first]) - ctx.origin_ns),
         page_link(ctx, "kernels", "the pageable copies", "kernels", q=PAGEABLE)],
        "Allocate the host tensors pinned (DataLoader(pin_memory=True), tensor.pin_memory()) and copy with "
        ".to(device, non_blocking=True); for device→host results, copy into a pinned buffer.",
        total // PINNED_SPEEDUP_DEN, total,
        f"pageable copy time / {PINNED_SPEEDUP_DEN} (pinned copies run at about twice the bandwidth; overlap "
        "with compute can save more)", "medium", "small")]


def dataloader_stalls(ctx: Context, slices: pa.Table) -> list[Finding]:
    """Time the main thread waits in DataLoader __next__, its first and last calls left out: the first waits for the
    workers to start and the last, at an epoch's end, for them to stop, which more workers do not fix
    (persistent_workers=True does, from the second epoch on)."""
    names = slices.column("name")
    loader = _mask(pc.starts_with(names, DATALOADER_PREFIX)) & _mask(pc.equal(slices.column("lane"), Lane.FRAMEWORK))
    if not loader.any():
        return []
    parent = slices.column("parent_id").to_numpy().astype(I64)
    ok = (parent >= 0) & (parent < len(loader))
    outer = np.flatnonzero(loader & ~(ok & loader[np.where(ok, parent, 0)]))
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    outer = outer[np.argsort(ts[outer], kind="stable")]
    first, rest = int(outer[0]), outer[1:-1]
    total, count = int(dur[rest].sum()), len(rest)
    if not count or total * HOST_BOUND_MIN_DEN < ctx.span_ns:
        return []
    slowest = int(rest[np.argmax(dur[rest])])
    multi = any("MultiProcessing" in str(n) for n in names.take(pa.array(rest)).to_pylist())
    fix = ("Add DataLoader workers (num_workers=4 or more, persistent_workers=True, prefetch_factor=2)"
           if not multi else "The workers do not keep up: raise num_workers, make __getitem__ cheaper, or move "
           "decoding/augmentation to the device") + " and pin_memory=True."
    return [make_finding(
        ctx, "dataloader-stalls", "The training loop waits for the DataLoader",
        "The main thread spends this time fetching the next batch instead of running the step.",
        [fact("fetches counted (not the first and last)", count, "count"), fact("time waiting for them", total),
         fact("slowest fetch", int(dur[slowest])), fact("first fetch (not counted)", int(dur[first])),
         fact("last fetch (not counted)", int(dur[outer[-1]]))],
        [timeline_link(ctx, "slowest fetch", int(ts[slowest]) - ctx.origin_ns,
                       int(ts[slowest] + dur[slowest]) - ctx.origin_ns)],
        fix, total, total,
        "time in DataLoader __next__ on the main thread but its first and last calls (workers starting and "
        "stopping); with workers prefetching, a batch is ready when asked for (an upper bound when loading is "
        "slower than the step)", "medium", "small")]


LOW_OCCUPANCY_PCT = 25  # below a quarter of the SM's warps resident, latency hiding suffers (CUDA best-practices)


def low_occupancy(ctx: Context, kernels: list[KernelRow]) -> list[Finding]:
    """Compute kernels whose launch record says low achieved occupancy (Kineto's `est. achieved occupancy %`),
    together at least 1/20 of the span (0 % is CUPTI's "not measured", not a reading). Occupancy does not convert
    to time, so the finding is not timed."""
    low = sorted(((k, occ) for k in kernels if k["category"] == "compute"
                  for occ in [_occupancy(k)] if occ is not None and 0 < occ < LOW_OCCUPANCY_PCT),
                 key=lambda item: (-item[0]["total_ns"], item[0]["name"]))
    total = sum(k["total_ns"] for k, _ in low)
    if not low or total * HOST_BOUND_MIN_DEN < ctx.span_ns:
        return []
    top, occ = low[0]
    return [make_finding(
        ctx, "low-occupancy", f"Kernels run at low occupancy: {top['name']} first",
        f"The launch records of these kernels estimate under {LOW_OCCUPANCY_PCT} % achieved occupancy (few warps "
        "resident per SM: too many registers or too much shared memory per block, or too few blocks).",
        [fact("kernels", len(low), "count"), fact("their device time", total),
         fact("the first one's device time", top["total_ns"]), fact("its est. occupancy", round(occ * 10_000), "ppm")],
        [page_link(ctx, "kernels", k["name"], "kernels", q=k["name"]) for k, _ in low[:3]],
        "Give each launch more work or fewer resources per thread: larger batch or sequence per kernel, "
        "torch.compile(mode='max-autotune') to autotune tile sizes, or for a custom kernel fewer registers "
        "(__launch_bounds__) and less shared memory per block.",
        None, total, "not timed: occupancy does not convert to time", "low", "medium")]


def _occupancy(k: KernelRow) -> float | None:
    return None if k["launch"] is None else k["launch"]["est_occupancy_pct"]
