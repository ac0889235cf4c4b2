"""On-chip memory of a Neuron device profile for the memory page: SBUF allocations (`SbufAllocation`: an address
range of one partition over a time range) replayed into the bytes allocated over time, its peak and what is live
at it by tensor; SBUF and PSUM utilisation (`SbufUsage`, `PsumUsage`) at their highest. Fields are those of
PROFILE_SCHEMA.md (schema 7.4); times stay absolute int ns here, the page makes them relative."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
from typing_extensions import TypedDict

from explorer.analysis.device.rows import table

Tables = dict[str, pa.Table]
UNNAMED = "(no tensor name)"


class TensorBytes(TypedDict):
    tensor: str
    bytes: int
    count: int


class UsagePeak(TypedDict):
    table: str  # SbufUsage | PsumUsage
    max_pct: float  # the highest avg_util_percent (percent, as the export writes it)
    at_ns: int
    samples: int


class OnChipMemory(TypedDict):
    """One device profile's on-chip memory; `sbuf_*` zero (and lists empty) without SbufAllocation rows."""

    profile_id: str
    name: str
    sbuf_allocations: int
    sbuf_bytes_allocated: int  # the sum of the allocations' sizes (end_address - start_address)
    sbuf_peak_bytes: int  # the most bytes allocated at once, all partitions together
    sbuf_peak_ns: int  # when (absolute; the first time it is reached), -1 without allocations
    sbuf_peak_partitions: int  # partitions holding an allocation at that moment
    sbuf_partition_peak_bytes: int  # the most bytes allocated at once in any one partition
    sbuf_at_peak: list[TensorBytes]  # what is live at the peak by tensor name; sums to sbuf_peak_bytes
    usage: list[UsagePeak]


def compute_onchip_memory(profile_id: str, name: str, tables: Tables) -> OnChipMemory | None:
    """The profile's on-chip memory; None when it has none of the three tables."""
    rows = _allocations(tables)
    usage = [u for u in (_usage(tables, "SbufUsage"), _usage(tables, "PsumUsage")) if u is not None]
    if not rows and not usage:
        return None
    peak, peak_ns, live = _peak(rows, list(range(len(rows))))
    by_partition = max((_peak(rows, [k for k, r in enumerate(rows) if r[0] == p])[0] for p in {r[0] for r in rows}),
                       default=0)
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for k in live:
        groups[rows[k][4]][0] += rows[k][3] - rows[k][2]
        groups[rows[k][4]][1] += 1
    at_peak = sorted((TensorBytes(tensor=t, bytes=v[0], count=v[1]) for t, v in groups.items()),
                     key=lambda r: (-r["bytes"], r["tensor"]))
    return OnChipMemory(profile_id=profile_id, name=name, sbuf_allocations=len(rows),
                        sbuf_bytes_allocated=sum(r[3] - r[2] for r in rows), sbuf_peak_bytes=peak,
                        sbuf_peak_ns=peak_ns, sbuf_peak_partitions=len({rows[k][0] for k in live}),
                        sbuf_partition_peak_bytes=by_partition, sbuf_at_peak=at_peak, usage=usage)


Row = tuple[int, int, int, int, str, int]  # partition, start_ts, start_address, end_address, tensor, end_ts


def _allocations(tables: Tables) -> list[Row]:
    found = table(tables, "SbufAllocation")
    if found is None:
        return []
    out: list[Row] = []
    for r in found.to_pylist():
        ts, end, lo, hi = (r.get(k) for k in ("start_ts", "end_ts", "start_address", "end_address"))
        if isinstance(ts, int) and isinstance(end, int) and isinstance(lo, int) and isinstance(hi, int) \
                and hi > lo and end > ts:  # (a zero-length allocation holds nothing)
            part = r.get("partition")
            out.append((part if isinstance(part, int) else -1, ts, lo, hi, str(r.get("tensor_name") or UNNAMED), end))
    return out


def _peak(rows: list[Row], keep: list[int]) -> tuple[int, int, list[int]]:
    """(the most bytes live at once among rows `keep`, the first time it is reached, the rows live then):
    allocations hold [start_ts, end_ts), so at one time the ends come before the starts."""
    edges = sorted([(rows[k][5], 0, k) for k in keep] + [(rows[k][1], 1, k) for k in keep])
    live: set[int] = set()
    level = best = 0
    best_ns, best_live = -1, []
    for ts, start, k in edges:
        size = rows[k][3] - rows[k][2]
        if start:
            live.add(k)
            level += size
            if level > best:
                best, best_ns, best_live = level, ts, sorted(live)
        else:
            live.discard(k)
            level -= size
    return best, best_ns, best_live


def _usage(tables: Tables, name: str) -> UsagePeak | None:
    found = table(tables, name)
    if found is None or "avg_util_percent" not in found.column_names:
        return None
    pairs = [(v, t) for v, t in zip(found.column("avg_util_percent").to_pylist(),
                                    found.column("timestamp").to_pylist(), strict=True)
             if isinstance(v, (int, float)) and isinstance(t, int)]
    if not pairs:
        return None
    top = max(pairs, key=lambda p: (p[0], -p[1]))
    return UsagePeak(table=name, max_pct=float(top[0]), at_ns=top[1], samples=len(pairs))
