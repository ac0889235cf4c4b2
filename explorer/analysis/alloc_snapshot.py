"""A CUDA allocator snapshot's story per device (the tables of explorer/ingest/alloc_snapshot.py): the active-memory
and reserved timelines replayed from the trace of actions back from the state at the snapshot, the peak and the
allocations live at it grouped by stack frame, fragmentation (reserved − active over time; free blocks at the
snapshot) and OOM events. Pure: Arrow tables in, ints out."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from typing_extensions import TypedDict

from explorer.analysis.memory import OwnerBytes, group_bytes, thin_indices

# action -> (series, sign): what each allocator action does to active (allocated) and reserved memory, as
# torch/cuda/_memory_viz.py `trace` replays them (a block stays active until its free completes)
EFFECT = {"alloc": ("active", 1), "free_completed": ("active", -1), "segment_alloc": ("reserved", 1),
          "segment_free": ("reserved", -1), "segment_map": ("reserved", 1), "segment_unmap": ("reserved", -1)}
NO_FRAME = "(no stack recorded)"


class SnapshotEnd(TypedDict):
    segments: int
    reserved: int  # the segments' total size
    active: int  # blocks in use or awaiting free
    requested: int  # what the active blocks' callers asked for
    free_external: int  # inactive blocks
    free_internal: int  # active blocks' rounding (size - requested)
    largest_free: int  # the largest inactive block


class Oom(TypedDict):
    seq: int
    time_us: int
    size: int
    device_free: int
    frame: str


class SnapshotDevice(TypedDict):
    device: int
    actions: int
    allocs: int
    frees: int
    x_kind: str  # time_us (the trace's own clock) or seq (the action's position, when times were not recorded)
    x: list[int]
    active: list[int]  # after each action (thinned)
    reserved: list[int]
    peak_bytes: int
    peak_seq: int  # -1: the peak is the state before the first recorded action
    peak_x: int
    peak_reserved: int
    peak_by_frame: list[OwnerBytes]  # sums to peak_bytes (explorer.analysis.memory.BEFORE: blocks allocated before the trace began)
    max_fragmentation: int  # the largest reserved - active over the trace
    end: SnapshotEnd
    ooms: list[Oom]


def compute_snapshot(trace: pa.Table, blocks: pa.Table, points: int = 1500) -> list[SnapshotDevice]:
    """Per device of the snapshot (those with segments or actions), its report."""
    t = {c: trace.column(c).to_pylist() for c in trace.column_names}
    b = {c: blocks.column(c).to_pylist() for c in blocks.column_names}
    devices = sorted(set(t["device"]) | set(b["device"]))
    out = []
    for d in devices:
        rows = [i for i, dev in enumerate(t["device"]) if dev == d]
        rows.sort(key=lambda i: t["seq"][i])
        out.append(_device(d, t, rows, _end(b, d), points))
    return out


def _end(b: dict[str, list[object]], device: int) -> SnapshotEnd:
    mine = [i for i, dev in enumerate(b["device"]) if dev == device]
    sizes = {b["segment"][i]: int(b["segment_size"][i]) for i in mine}  # type: ignore[call-overload]
    active = [i for i in mine if str(b["state"][i]).startswith("active")]
    free = [int(b["size"][i]) for i in mine if not str(b["state"][i]).startswith("active")]  # type: ignore[call-overload]
    size = {i: int(b["size"][i]) for i in mine}  # type: ignore[call-overload]
    requested = {i: int(b["requested_size"][i]) for i in active}  # type: ignore[call-overload]
    return SnapshotEnd(segments=len(sizes), reserved=sum(sizes.values()), active=sum(size[i] for i in active),
                       requested=sum(requested.values()), free_external=sum(free),
                       free_internal=sum(size[i] - requested[i] for i in active), largest_free=max(free, default=0))


def _device(device: int, t: dict[str, list[object]], rows: list[int], end: SnapshotEnd,
            points: int) -> SnapshotDevice:
    actions = [str(t["action"][i]) for i in rows]
    size = np.asarray([t["size"][i] for i in rows], dtype=np.int64)
    delta = {"active": np.zeros(len(rows), np.int64), "reserved": np.zeros(len(rows), np.int64)}
    for k, action in enumerate(actions):
        if (effect := EFFECT.get(action)) is not None:
            delta[effect[0]][k] = effect[1] * size[k]
    # the trace ends at the snapshot: each series starts where the state at the end, less the trace's net, puts it
    active = end["active"] - int(delta["active"].sum()) + np.cumsum(delta["active"])
    reserved = end["reserved"] - int(delta["reserved"].sum()) + np.cumsum(delta["reserved"])
    start_active = end["active"] - int(delta["active"].sum())
    times = [int(t["time_us"][i]) for i in rows]  # type: ignore[call-overload]
    timed = bool(rows) and all(x >= 0 for x in times)
    xs = times if timed else [int(t["seq"][i]) for i in rows]  # type: ignore[call-overload]
    at = int(np.argmax(active)) if rows else -1
    if at < 0 or start_active > int(active[at]):
        at = -1
    peak = start_active if at < 0 else int(active[at])
    keep = thin_indices(active, points)
    return SnapshotDevice(
        device=device, actions=len(rows), allocs=actions.count("alloc"), frees=actions.count("free_completed"),
        x_kind="time_us" if timed else "seq", x=[xs[k] for k in keep.tolist()], active=active[keep].tolist(),
        reserved=reserved[keep].tolist(), peak_bytes=peak, peak_seq=-1 if at < 0 else int(t["seq"][rows[at]]),  # type: ignore[call-overload]
        peak_x=-1 if at < 0 else xs[at], peak_reserved=int(reserved[at]) if at >= 0 else end["reserved"] - int(
            delta["reserved"].sum()),
        peak_by_frame=_live_by_frame(t, rows, actions, at, peak),
        max_fragmentation=int((reserved - active).max()) if rows else end["reserved"] - end["active"],
        end=end,
        ooms=[Oom(seq=int(t["seq"][i]), time_us=int(t["time_us"][i]), size=int(t["size"][i]),  # type: ignore[call-overload]
                  device_free=int(t["device_free"][i]), frame=str(t["frame"][i]) or NO_FRAME)  # type: ignore[call-overload]
              for i in rows if t["action"][i] == "oom"],
    )


def _live_by_frame(t: dict[str, list[object]], rows: list[int], actions: list[str], at: int,
                   peak: int) -> list[OwnerBytes]:
    """The blocks allocated in the trace up to action `at` and not freed by then, by their innermost frame; what
    they do not explain (blocks allocated before the trace began) is BEFORE."""
    live: dict[object, int] = {}
    for k in range(at + 1):
        addr = t["addr"][rows[k]]
        if actions[k] == "alloc":
            live[addr] = rows[k]
        elif actions[k] == "free_completed":
            live.pop(addr, None)
    pairs = [(str(t["frame"][i]) or NO_FRAME, int(t["size"][i])) for i in live.values()]  # type: ignore[call-overload]
    return group_bytes(pairs, peak)
