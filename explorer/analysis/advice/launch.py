"""Launch-shape and copy rules: kernels launched with fewer blocks than the device has SMs (`small-grid`, from the
launch grid and deviceProperties' numSms), and device-to-host copies that block the host (`blocking-copy`: a
Memcpy DtoH under aten::to / _to_copy / copy_ whose op also synchronises), timed by the device idle after them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.advice.finding import Context, fact, make_finding, page_link, timeline_link
from explorer.analysis.advice.ops import nearest_ancestor
from explorer.analysis.kernels import categorize
from explorer.model.advice_shapes import Finding
from explorer.model.lanes import Lane

I64 = np.int64
SMALL_GRID_MIN_DEN = 20  # small-grid kernels together at least 1/20 of the span
COPY_OPS = ("aten::to", "aten::_to_copy", "aten::copy_")
# runtime calls that return only once the copy is done: a synchronous memcpy, or a wait on the stream / device
BLOCKING_CALLS = ("cudaMemcpy", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                  "hipMemcpy", "hipStreamSynchronize", "hipDeviceSynchronize", "cuMemcpyDtoH_v2", "cuStreamSynchronize",
                  "cuCtxSynchronize")
MIN_BLOCKING_COPIES = 2  # one copy (a final loss print) is not the steady state


def _mask(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), bool)


def small_grid(ctx: Context, slices: pa.Table, blocks: dict[int, int], num_sms: int) -> list[Finding]:
    """Compute kernel executions (explorer.analysis.kernels' category) whose grid has fewer blocks than the device has SMs (`blocks`: slice id -> blocks in the
    grid; `num_sms` from deviceProperties, 0 unknown), together at least 1/20 of the span. Not timed: a kernel
    that leaves SMs idle is not faster split up unless its work can be."""
    if num_sms <= 0 or not blocks:
        return []
    ids = np.fromiter(blocks, I64, len(blocks))
    count = np.fromiter(blocks.values(), I64, len(blocks))
    small = (count > 0) & (count < num_sms) & (ids >= 0) & (ids < slices.num_rows)
    ids, count = ids[small], count[small]
    if len(ids):  # compute kernels only: NCCL and other collectives run on few blocks by design
        cats = categorize(slices.column("name").take(pa.array(ids)).combine_chunks(),
                          slices.column("cat").take(pa.array(ids)).combine_chunks())
        compute = np.asarray(pc.fill_null(pc.equal(cats, "compute"), False).to_numpy(zero_copy_only=False), bool)
        ids, count = ids[compute], count[compute]
    if not len(ids):
        return []
    dur = slices.column("dur_ns").to_numpy().astype(I64)[ids]
    total = int(dur.sum())
    if total * SMALL_GRID_MIN_DEN < ctx.span_ns:
        return []
    idle_sm_ns = int((dur * (num_sms - count) // num_sms).sum())  # SM-time the grids leave empty, per SM
    names = slices.column("name").take(pa.array(ids)).to_pylist()
    by_name: dict[str, int] = {}
    for n, d in zip(names, dur.tolist(), strict=True):
        by_name[str(n)] = by_name.get(str(n), 0) + d
    top = sorted(by_name, key=lambda k: (-by_name[k], k))
    return [make_finding(
        ctx, "small-grid", f"Kernels launch fewer blocks than the device has SMs: {top[0]} first",
        f"These kernels' launch grids hold fewer thread blocks than the device's {num_sms} SMs, so some SMs have "
        "nothing to run while they execute.",
        [fact("executions", len(ids), "count"), fact("kernels", len(top), "count"), fact("SMs (numSms)", num_sms,
                                                                                     "count"),
         fact("their device time", total), fact("median blocks per grid", int(np.median(count)), "count"),
         fact("SM time the grids leave idle, per SM", idle_sm_ns)],
        [page_link(ctx, "kernels", k, "kernels", q=k) for k in top[:3]],
        "Give each launch more blocks: batch more work per kernel (larger batch, fuse small ops with torch.compile), "
        "split the reduction or sequence dimension across blocks (split-K, Flash-Decoding), or run independent "
        "small kernels on separate CUDA streams so they share the SMs.",
        None, total, "not timed: SMs a small grid leaves idle turn into time saved only if the work can be spread "
        "over them", "low", "medium")]


def _union_gaps(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The idle intervals between the union of [start, end) intervals: (gap starts, gap ends)."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    gap = s[1:] > e[:-1]
    return e[:-1][gap], s[1:][gap]


def blocking_copy(ctx: Context, slices: pa.Table) -> list[Finding]:
    """Device-to-host copies (Memcpy DtoH) under an aten::to / _to_copy / copy_ whose op subtree also holds a
    blocking runtime call (a synchronous cudaMemcpy, or cuda*Synchronize), at least twice; saving: the device idle
    that starts where each such copy ends (the host, blocked until then, launches the next work only after)."""
    names = slices.column("name")
    dev = _mask(slices.column("device_time"))
    dtoh = np.flatnonzero(dev & _mask(pc.match_substring(names, "DtoH")) & _mask(pc.match_substring(
        pc.utf8_lower(slices.column("cat")), "memcpy")))
    if len(dtoh) < MIN_BLOCKING_COPIES:
        return []
    n = slices.num_rows
    parent = slices.column("parent_id").to_numpy().astype(I64)
    op_id = slices.column("op_id").to_numpy().astype(I64)
    is_copy = _mask(pc.is_in(names, pa.array(COPY_OPS)))
    blocks = np.flatnonzero(_mask(pc.is_in(names, pa.array(BLOCKING_CALLS))) &
                            _mask(pc.equal(slices.column("lane"), Lane.RUNTIME)))
    blocked = np.zeros(n, bool)  # copy ops with a blocking call under them: every copy-op ancestor of its op
    cur = op_id[blocks]
    for _ in range(256):
        live = (cur >= 0) & (cur < n)
        if not live.any():
            break
        cur = cur[live]
        blocked[cur[is_copy[cur]]] = True
        cur = parent[cur]
    own = op_id[dtoh]
    self_hit = (own >= 0) & (own < n) & blocked[np.where((own >= 0) & (own < n), own, 0)]
    copies = dtoh[self_hit | (nearest_ancestor(parent, own, blocked) >= 0)]
    if len(copies) < MIN_BLOCKING_COPIES:
        return []
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    execs = np.flatnonzero(dev)
    gap_start, gap_end = _union_gaps(ts[execs], ts[execs] + dur[execs])
    idle = int((gap_end - gap_start).sum())
    at = np.searchsorted(gap_start, ts[copies] + dur[copies])
    hit = (at < len(gap_start)) & (gap_start[np.minimum(at, max(len(gap_start) - 1, 0))] == ts[copies] + dur[copies]) \
        if len(gap_start) else np.zeros(len(copies), bool)
    after = np.unique(at[hit])
    saving = int((gap_end[after] - gap_start[after]).sum())
    if saving == 0:
        return []
    first = int(copies[np.argmin(ts[copies])])
    return [make_finding(
        ctx, "blocking-copy", f"{len(copies)} device-to-host copies block the host",
        "Tensors are copied to the host (.cpu(), .to('cpu'), .item(), .tolist()) and the host waits for each copy "
        "(a synchronous memcpy or a stream synchronize), so it cannot queue the next kernels: the device idles "
        "after every copy.",
        [fact("blocking DtoH copies", len(copies), "count"), fact("their device time", int(dur[copies].sum())),
         fact("device idle right after them", saving), fact("all device idle between executions", idle)],
        [timeline_link(ctx, "first blocking copy", int(ts[first]) - ctx.origin_ns,
                       int(ts[first] + dur[first]) - ctx.origin_ns),
         page_link(ctx, "kernels", "the DtoH copies", "kernels", category="memcpy DtoH")],
        "Keep the values on the device in the loop, or copy into pinned memory without waiting: "
        "buf = torch.empty(shape, pin_memory=True); buf.copy_(x, non_blocking=True); record an event and read buf "
        "a step later (event.synchronize()), or log every N steps.",
        saving, idle, "Σ of the device idle intervals that start where a blocking DtoH copy ends (the device waits "
        "for the blocked host to launch again); overlaps the sync-points finding when both fire", "medium", "small")]
