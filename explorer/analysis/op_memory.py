"""Memory columns of the op table: per row (name, and input shapes when grouped) the bytes its ops allocated (under
the op, and directly), how many allocations, torch's net "CPU Mem" (allocations less frees, as key_averages()
counts them) and the bytes of its allocations live at the device's peak; optionally per nn.Module path too. Pure:
the op tree (explorer.analysis.op_stats) and one device's [memory] events in, an Arrow table out (docs/memory.md)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from explorer.analysis.op_stats import OpEvents

OP_MEMORY = pa.schema([
    ("module", pa.string()),  # the enclosing nn.Module path ("" when not grouped by module)
    ("name", pa.string()), ("input_shapes", pa.string()),
    ("allocated_bytes", pa.int64()),  # sum of the allocations (Bytes > 0) in the op's interval on its thread
    ("self_allocated_bytes", pa.int64()),  # ... less its children's
    ("allocations", pa.int64()), ("self_allocations", pa.int64()),
    ("net_bytes", pa.int64()),  # allocations less frees: key_averages()'s cpu_memory_usage (device_: CUDA)
    ("self_net_bytes", pa.int64()),
    ("peak_bytes", pa.int64()),  # of the allocations made in the op, those live at the device's peak
    ("self_peak_bytes", pa.int64()),
])
# the memory columns of an op row, in the page's order (the row's other columns: explorer.store.queries.OP_COLUMNS)
OP_MEMORY_COLUMNS = tuple(f.name for f in OP_MEMORY)[3:]


def compute_op_memory(ev: OpEvents, op_ts: np.ndarray, op_end: np.ndarray, op_thread: np.ndarray,
                      mem_ts: np.ndarray, mem_thread: np.ndarray, mem_bytes: np.ndarray, live_at_peak: np.ndarray,
                      by_shape: bool, keep: np.ndarray | None = None, modules: pa.Array | None = None) -> pa.Table:
    """Per op row the memory columns. `op_*`: per op of `ev.ops` its [ts, end] and host thread; `mem_*`: one
    device's events (thread, signed bytes), `live_at_peak` marking the allocations live at that device's peak.
    An op's totals count the events in its closed interval on its thread, as torch's MemRecordsAcc does (torch
    ignores the thread); its self columns the events whose innermost op (or frame) it is, so that each event
    counts once in the self columns whatever the tree (ProfilerStep ranges that cross Python frames).
    `keep` (bool per op): only those ops are rows (a time range's); an event whose innermost op is not kept
    counts for no row. `modules` (per op, its nn.Module path): rows per (module, name[, shapes])."""
    n = len(ev.ops)
    values = (np.where(mem_bytes > 0, mem_bytes, 0), (mem_bytes > 0).astype(np.int64), mem_bytes,
              np.where(live_at_peak, mem_bytes, 0))
    totals = np.zeros((len(values), n), dtype=np.int64)
    selfs = np.zeros((len(values), n), dtype=np.int64)
    for th in np.unique(op_thread).tolist():
        mine = np.flatnonzero(mem_thread == th)
        ops = np.flatnonzero(op_thread == th)
        if not len(mine) or th < 0:
            continue
        order = mine[np.argsort(mem_ts[mine], kind="stable")]
        ts = mem_ts[order]
        lo = np.searchsorted(ts, op_ts[ops], side="left")
        hi = np.searchsorted(ts, op_end[ops], side="right")
        owner = innermost(op_ts[ops], op_end[ops], ts)
        owned = owner >= 0
        for k, v in enumerate(values):
            prefix = np.concatenate(([0], np.cumsum(v[order])))
            totals[k, ops] = prefix[hi] - prefix[lo]
            np.add.at(selfs[k], ops[owner[owned]], v[order][owned])
    # (one code per name, or per (name, shapes) pair: the same grouping as explorer.analysis.op_stats)
    codes = ev.key_codes * (int(ev.shape_codes.max(initial=0)) + 1) + ev.shape_codes if by_shape else ev.key_codes
    if modules is not None:
        module_codes = np.unique(np.asarray(modules.to_pylist(), dtype=object), return_inverse=True)[1]
        codes = module_codes.astype(np.int64) * (int(codes.max(initial=0)) + 1) + codes
    kept = np.arange(n) if keep is None else np.flatnonzero(keep)
    groups, first, codes = np.unique(codes[kept], return_index=True, return_inverse=True)
    first = kept[first]
    g = len(groups)
    summed = [_sum(codes, g, col[kept]) for k in range(len(values)) for col in (totals[k], selfs[k])]
    columns = {"module": modules.take(pa.array(first)) if modules is not None else pa.array([""] * g, pa.string()),
               "name": ev.key_names.take(pa.array(ev.key_codes[first])),
               "input_shapes": ev.shape_names.take(pa.array(ev.shape_codes[first])) if by_shape
               else pa.array([""] * g, pa.string())}
    columns |= dict(zip(OP_MEMORY_COLUMNS, summed, strict=True))
    return pa.table(columns, schema=OP_MEMORY)


def innermost(start: np.ndarray, end: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per time (sorted), the position of the latest-starting interval [start, end] (closed) that holds it, -1 none:
    a sweep over the intervals by start (longest first) keeping those still open."""
    order = np.lexsort((start - end, start)).tolist()
    s, e = start.tolist(), end.tolist()
    out = np.full(len(times), -1, dtype=np.int64)
    stack: list[int] = []
    k = 0
    for i, t in enumerate(times.tolist()):
        while k < len(order) and s[order[k]] <= t:
            o = order[k]
            while stack and e[stack[-1]] < s[o]:
                stack.pop()
            stack.append(o)
            k += 1
        while stack and e[stack[-1]] < t:
            stack.pop()
        out[i] = next((o for o in reversed(stack) if e[o] >= t), -1)  # (crossing ranges leave closed ones below)
    return out


def _sum(codes: np.ndarray, groups: int, values: np.ndarray) -> np.ndarray:
    """Exact int64 sums per group (np.bincount's weights would go through float64)."""
    out = np.zeros(groups, dtype=np.int64)
    np.add.at(out, codes, values)
    return out
