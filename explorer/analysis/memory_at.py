"""What a memory counter track shows at one time, for the timeline's hover: the [memory] event in force there (the
last of its device at or before the time) with the op that owns its bytes (a free: the freed allocation's owner)
and when the next event changes it. Pure: one device's events, owners and pairing in; ints (bytes, ns) out."""

from __future__ import annotations

import numpy as np
from typing_extensions import TypedDict

from explorer.analysis.memory import DEVICE_NAMES, MemoryEvents, Owners


class MemoryAtEvent(TypedDict):
    ts_ns: int
    bytes: int  # > 0 an allocation, < 0 a free
    allocated: int  # Total Allocated after it
    reserved: int
    owner: str  # the allocation's owner op (for a free, the freed allocation's); "" unknown (before the profile)
    op: str  # ... its innermost op
    frame: str
    module: str
    alloc_ts_ns: int  # when the allocation was made (for a free; -1: before the profile); its own time otherwise
    free_ts_ns: int  # when the allocation is freed (-1: not in the profile); its own time for a free


class MemoryAt(TypedDict):
    """GET /api/runs/{id}/memory/at: the event of `device` in force at `at_ns` (null before its first) and the time
    of the next one (-1 none): the hover's answer holds for [event.ts_ns, next_ts_ns)."""

    device: str
    series: str  # allocated | reserved: which counter track asked
    at_ns: int
    event: MemoryAtEvent | None
    next_ts_ns: int


def compute_memory_at(ev: MemoryEvents, owners: Owners, partner: np.ndarray, device: str, series: str,
                      at_ns: int) -> MemoryAt:
    """The event of `device` in force at `at_ns` (times as in `ev`), its owner named as described above."""
    mine = np.flatnonzero(np.asarray([d == device for d in ev.device], dtype=bool))
    k = int(np.searchsorted(ev.ts_ns[mine], at_ns, side="right")) - 1
    nxt = int(ev.ts_ns[mine[k + 1]]) if k + 1 < len(mine) else -1
    if k < 0:
        return MemoryAt(device=device, series=series, at_ns=at_ns, event=None, next_ts_ns=nxt)
    i = int(mine[k])
    j = int(partner[i])
    alloc = i if ev.nbytes[i] > 0 else j  # the allocation whose bytes these are (-1: made before the profile)
    ts = int(ev.ts_ns[i])
    event = MemoryAtEvent(
        ts_ns=ts, bytes=int(ev.nbytes[i]), allocated=int(ev.allocated[i]), reserved=int(ev.reserved[i]),
        owner=owners.owner[alloc] if alloc >= 0 else "", op=owners.op[alloc] if alloc >= 0 else "",
        frame=owners.frame[alloc] if alloc >= 0 else "", module=owners.module[alloc] if alloc >= 0 else "",
        alloc_ts_ns=int(ev.ts_ns[alloc]) if alloc >= 0 else -1,
        free_ts_ns=ts if ev.nbytes[i] < 0 else (int(ev.ts_ns[j]) if j >= 0 else -1))
    return MemoryAt(device=device, series=series, at_ns=at_ns, event=event, next_ts_ns=nxt)


def counter_where(device: str) -> str:
    """The device as the ingest names its memory counter tracks ("memory allocated (<where>) [bytes]"), from the
    name explorer.analysis.memory.device_name gives it: CPU -> CPU, CUDA 0 -> device 1:0, device 7 3 -> device 7:3."""
    if device == "CPU":
        return device
    kind, _, dev_id = device.rpartition(" ")
    number = {name: str(code) for code, name in DEVICE_NAMES.items()}.get(kind, kind.removeprefix("device "))
    return f"device {number}:{dev_id}"
