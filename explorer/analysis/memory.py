"""Where the bytes go, from Kineto's `[memory]` instants: allocations paired with frees by (device, address),
each owned by the op running on its thread, the per-device timeline, the peak and what is live at it, the
allocations still live at the end, and the churn per step. Pure: columns in, ints (bytes, ns) out; reading
the instants from a run is the caller's (explorer/views/memory.py), words and units the page's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from typing_extensions import TypedDict

from explorer.model.shapes import MemoryOwnerDelta as OwnerDelta
from explorer.model.shapes import MemoryPeakDelta as PeakDelta

# Ops that only obtain storage for the op around them: an allocation's owner is the innermost op not listed here
# (aten::clone's aten::empty_strided belongs to aten::clone). The innermost op is kept too (`op`).
ALLOCATION_PRIMITIVES = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided",
    "aten::resize_", "aten::as_strided", "aten::view", "aten::reshape", "aten::_reshape_alias",
})
BEFORE = "(allocated before the profile)"  # live bytes no paired allocation explains (Total Allocated minus ours)
NO_OP = "(no op)"  # an allocation while no framework op ran on its thread
FRAME_CATS = frozenset({"python_function"})  # with_stack / with_modules frames among the framework slices
MODULE_PREFIX = "nn.Module: "
DEVICE_NAMES = {0: "CPU", 1: "CUDA"}  # c10::DeviceType values Kineto writes in "Device Type"
SIZE_BUCKETS = (4096, 65536, 1 << 20, 16 << 20, 256 << 20)  # upper bounds (bytes) of the size groups at the peak


@dataclass(frozen=True)
class MemoryEvents:
    """[memory] instants, one row each, in time order (ties as stored: by thread, then as written): their args."""

    ts_ns: np.ndarray  # int64
    thread: np.ndarray  # int64: the host thread (an index into the caller's threads)
    addr: list[int]
    nbytes: np.ndarray  # int64, > 0 an allocation, < 0 a free
    allocated: np.ndarray  # int64: Total Allocated after the event
    reserved: np.ndarray  # int64: Total Reserved after the event
    device: list[str]


@dataclass(frozen=True)
class ThreadOps:
    """The framework slices (ops, annotations, python frames) of one host thread."""

    ts_ns: np.ndarray
    end_ns: np.ndarray
    name: list[str]
    cat: list[str]


@dataclass(frozen=True)
class Owners:
    """Per event: the innermost op, the owner (innermost op that is not an allocation primitive), the innermost
    python frame and nn.Module (when with_stack / with_modules); NO_OP / "" where none."""

    op: list[str]
    owner: list[str]
    frame: list[str]
    module: list[str]


class OwnerBytes(TypedDict):
    owner: str
    bytes: int
    count: int


class Allocation(TypedDict):
    ts_ns: int
    free_ns: int  # -1: still live at the end of the profile
    bytes: int
    device: str
    owner: str
    op: str
    frame: str
    module: str
    step: str


class Peak(TypedDict):
    device: str
    ts_ns: int
    bytes: int  # the maximum of Total Allocated
    reserved: int  # Total Reserved at that moment
    by_owner: list[OwnerBytes]  # sums to bytes (BEFORE holds what no paired allocation explains)
    by_module: list[OwnerBytes]
    by_size: list[OwnerBytes]  # owner: the size group's upper bound in bytes as text, "larger" past the last
    largest: list[Allocation]


class Leak(TypedDict):
    owner: str
    device: str
    count: int
    bytes: int
    steps: int  # in how many steps it left allocations live at the end


class StepChurn(TypedDict):
    step: str
    ts_ns: int
    dur_ns: int
    allocations: int
    allocated_bytes: int
    frees: int
    freed_bytes: int
    peak_bytes: int  # the maximum of Total Allocated (all devices' events in the step; per device below)
    device: str


class Timeline(TypedDict):
    device: str
    ts_ns: list[int]
    allocated: list[int]
    reserved: list[int]
    owners: list[str]  # the stacked series' names, biggest at the peak first; the last is BEFORE
    stacked: list[list[int]]  # per owner, its live bytes at each ts_ns; together they sum to `allocated`


class MemoryReport(TypedDict):
    events: int
    allocations: int
    frees: int
    unmatched_frees: int  # frees of allocations made before the profile
    devices: list[str]
    peaks: list[Peak]
    timelines: list[Timeline]
    top_owners: list[OwnerBytes]  # by bytes allocated over the profile (count: allocations)
    leaks: list[Leak]
    live_at_end: list[Allocation]
    churn: list[StepChurn]


def device_name(device_type: object, device_id: object) -> str:
    """A device's label from a [memory] instant's "Device Type" and "Device Id" (as the counters name it)."""
    if device_type == 0:
        return "CPU"
    kind = DEVICE_NAMES.get(device_type, f"device {device_type}") if isinstance(device_type, int) else "device"
    return f"{kind} {device_id}"


def compute_owners(events: MemoryEvents, ops: Sequence[ThreadOps | None]) -> Owners:
    """Each event's op, owner, frame and module: a sweep per thread over its slices sorted by start (longest
    first), keeping a stack of the slices open at the event's time (half-open [ts, end))."""
    n = len(events.ts_ns)
    out = Owners([NO_OP] * n, [NO_OP] * n, [""] * n, [""] * n)
    by_thread: dict[int, list[int]] = defaultdict(list)
    for i, th in enumerate(events.thread.tolist()):
        by_thread[th].append(i)
    for th, idx in by_thread.items():
        thread_ops = ops[th] if 0 <= th < len(ops) else None
        if thread_ops is None or not len(thread_ops.ts_ns):
            continue
        ts, end = thread_ops.ts_ns.tolist(), thread_ops.end_ns.tolist()
        order = np.lexsort((thread_ops.ts_ns - thread_ops.end_ns, thread_ops.ts_ns)).tolist()
        stack: list[int] = []
        seen: dict[tuple[int, ...], tuple[str, str, str, str]] = {}
        k = 0
        times = events.ts_ns.tolist()
        for i in sorted(idx, key=times.__getitem__):
            t = times[i]
            while k < len(order) and ts[order[k]] <= t:
                o = order[k]
                while stack and end[stack[-1]] <= ts[o]:
                    stack.pop()
                stack.append(o)
                k += 1
            while stack and end[stack[-1]] <= t:
                stack.pop()
            open_ = tuple(o for o in stack if end[o] > t)
            if (named := seen.get(open_)) is None:  # (allocations in one op share its stack)
                named = seen[open_] = _names(open_, thread_ops)
            out.op[i], out.owner[i], out.frame[i], out.module[i] = named
    return out


def _names(open_: tuple[int, ...], ops: ThreadOps) -> tuple[str, str, str, str]:
    """(op, owner, frame, module) of an event with these slices open (outermost first)."""
    ops_only = [o for o in open_ if ops.cat[o] not in FRAME_CATS]
    frames = [o for o in open_ if ops.cat[o] in FRAME_CATS]
    op = owner = NO_OP
    frame = module = ""
    if ops_only:
        op = ops.name[ops_only[-1]]
        owner = ops.name[next((o for o in reversed(ops_only) if ops.name[o] not in ALLOCATION_PRIMITIVES),
                              ops_only[-1])]
    if frames:
        frame = ops.name[frames[-1]]
        module = next((ops.name[o] for o in reversed(frames) if ops.name[o].startswith(MODULE_PREFIX)), "")
    return op, owner, frame, module


def pair_allocations(events: MemoryEvents) -> np.ndarray:
    """Per event: for an allocation, the index of the free that ends it (-1: live at the end); for a free, the
    index of its allocation (-1: made before the profile). Paired by (device, address), in event order."""
    n = len(events.ts_ns)
    partner = np.full(n, -1, dtype=np.int64)
    open_: dict[tuple[str, int], int] = {}
    nbytes = events.nbytes.tolist()
    for i in range(n):
        key = (events.device[i], events.addr[i])
        if nbytes[i] > 0:
            open_[key] = i  # (a second allocation at an open address: the first's free was not recorded)
        elif nbytes[i] < 0 and (j := open_.pop(key, -1)) >= 0:
            partner[i], partner[j] = j, i
    return partner


def compute_memory(events: MemoryEvents, owners: Owners, steps: Sequence[tuple[str, int, int]],
                   points: int = 1500) -> MemoryReport:
    """The memory report of a run's [memory] instants; `steps` are (name, ts_ns, end_ns) of its ProfilerSteps."""
    partner = pair_allocations(events)
    nb = events.nbytes
    allocs = np.flatnonzero(nb > 0)
    frees = np.flatnonzero(nb < 0)
    step_of = _step_names(events.ts_ns, steps)
    devices = sorted(set(events.device), key=lambda d: (d != "CPU", d))
    live_end = [i for i in allocs.tolist() if partner[i] < 0]
    return MemoryReport(
        events=len(nb), allocations=len(allocs), frees=len(frees),
        unmatched_frees=int((partner[frees] < 0).sum()), devices=devices,
        peaks=[_peak(events, owners, partner, d, step_of) for d in devices],
        timelines=[_timeline(events, owners, partner, d, points) for d in devices],
        top_owners=group_bytes(((owners.owner[i], int(nb[i])) for i in allocs.tolist()), total=None),
        leaks=_leaks(events, owners, live_end, step_of),
        live_at_end=sorted((_allocation(events, owners, partner, i, step_of) for i in live_end),
                           key=lambda a: -a["bytes"])[:50],
        churn=_churn(events, steps),
    )


def _step_names(ts_ns: np.ndarray, steps: Sequence[tuple[str, int, int]]) -> list[str]:
    names = [""] * len(ts_ns)
    for name, start, end in steps:
        lo, hi = np.searchsorted(ts_ns, [start, end], side="left")
        for i in range(int(lo), int(hi)):
            names[i] = name
    return names


def _allocation(ev: MemoryEvents, owners: Owners, partner: np.ndarray, i: int, step_of: list[str]) -> Allocation:
    j = int(partner[i])
    return Allocation(ts_ns=int(ev.ts_ns[i]), free_ns=int(ev.ts_ns[j]) if j >= 0 else -1, bytes=int(ev.nbytes[i]),
                      device=ev.device[i], owner=owners.owner[i], op=owners.op[i], frame=owners.frame[i],
                      module=owners.module[i], step=step_of[i])


def _live_at(ev: MemoryEvents, partner: np.ndarray, device: str, at: int) -> list[int]:
    """The paired-or-unfreed allocations of `device` made at or before event `at` and not freed by it."""
    return [i for i in range(at + 1) if ev.device[i] == device and ev.nbytes[i] > 0
            and (partner[i] < 0 or partner[i] > at)]


def live_at_peak(ev: MemoryEvents, partner: np.ndarray, device: str) -> np.ndarray:
    """Per event: an allocation of `device` live at its peak (the first event at the maximum of Total Allocated)."""
    mine = np.flatnonzero(np.asarray([d == device for d in ev.device], dtype=bool))
    out = np.zeros(len(ev.ts_ns), dtype=bool)
    if len(mine):
        out[_live_at(ev, partner, device, int(mine[int(np.argmax(ev.allocated[mine]))]))] = True
    return out


def _peak(ev: MemoryEvents, owners: Owners, partner: np.ndarray, device: str, step_of: list[str]) -> Peak:
    mine = np.flatnonzero(np.asarray([d == device for d in ev.device], dtype=bool))
    at = int(mine[int(np.argmax(ev.allocated[mine]))])  # the first event reaching the maximum
    total = int(ev.allocated[at])
    live = _live_at(ev, partner, device, at)
    sizes = [(next((f"{b}" for b in SIZE_BUCKETS if ev.nbytes[i] <= b), "larger"), int(ev.nbytes[i])) for i in live]
    return Peak(
        device=device, ts_ns=int(ev.ts_ns[at]), bytes=total, reserved=int(ev.reserved[at]),
        by_owner=group_bytes(((owners.owner[i], int(ev.nbytes[i])) for i in live), total),
        by_module=group_bytes(((owners.module[i] or "(no module)", int(ev.nbytes[i])) for i in live), total),
        by_size=group_bytes(sizes, total),
        largest=sorted((_allocation(ev, owners, partner, i, step_of) for i in live), key=lambda a: -a["bytes"])[:20],
    )


def group_bytes(pairs: Iterable[tuple[str, int]], total: int | None) -> list[OwnerBytes]:
    """(key, bytes) pairs summed per key, biggest first; with a total, BEFORE holds the rest (when not 0)."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, nbytes in pairs:
        sums[key][0] += nbytes
        sums[key][1] += 1
    rows = [OwnerBytes(owner=k, bytes=v[0], count=v[1]) for k, v in sums.items()]
    if total is not None and (rest := total - sum(r["bytes"] for r in rows)):
        rows.append(OwnerBytes(owner=BEFORE, bytes=rest, count=0))
    return sorted(rows, key=lambda r: (-r["bytes"], r["owner"]))


def _leaks(ev: MemoryEvents, owners: Owners, live_end: list[int], step_of: list[str]) -> list[Leak]:
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in live_end:
        groups[(owners.owner[i], ev.device[i])].append(i)
    rows = [Leak(owner=o, device=d, count=len(idx), bytes=sum(int(ev.nbytes[i]) for i in idx),
                 steps=len({step_of[i] for i in idx if step_of[i]})) for (o, d), idx in groups.items()]
    return sorted(rows, key=lambda r: (-r["steps"], -r["bytes"], r["owner"]))


def _churn(ev: MemoryEvents, steps: Sequence[tuple[str, int, int]]) -> list[StepChurn]:
    rows: list[StepChurn] = []
    for name, start, end in steps:
        lo, hi = (int(x) for x in np.searchsorted(ev.ts_ns, [start, end], side="left"))
        for device in sorted({ev.device[i] for i in range(lo, hi)}, key=lambda d: (d != "CPU", d)):
            at = np.asarray([i for i in range(lo, hi) if ev.device[i] == device], dtype=np.int64)
            nb = ev.nbytes[at]
            rows.append(StepChurn(step=name, ts_ns=start, dur_ns=end - start, device=device,
                                  allocations=int((nb > 0).sum()), allocated_bytes=int(nb[nb > 0].sum()),
                                  frees=int((nb < 0).sum()), freed_bytes=int(-nb[nb < 0].sum()),
                                  peak_bytes=int(ev.allocated[at].max())))
    return rows


TOP_STACKED = 8  # owners drawn as their own band in the stacked timeline; the rest are summed as "(other)"
OTHER = "(other ops)"


def _timeline(ev: MemoryEvents, owners: Owners, partner: np.ndarray, device: str, points: int) -> Timeline:
    """Allocated / reserved after each event of `device`, and the live bytes per owner (the top owners at the
    peak, the rest summed, BEFORE the remainder) — thinned to about `points` samples that keep every extreme."""
    mine = [i for i in range(len(ev.device)) if ev.device[i] == device]
    peak_at = mine[int(np.argmax(ev.allocated[mine]))]
    at_peak = group_bytes(((owners.owner[i], int(ev.nbytes[i])) for i in _live_at(ev, partner, device, peak_at)), None)
    top = [r["owner"] for r in at_peak[:TOP_STACKED]]
    names = [*top, OTHER, BEFORE]
    col = {name: k for k, name in enumerate(top)}
    delta = np.zeros((len(names) - 1, len(mine)), dtype=np.int64)
    row_of_event: dict[int, int] = {}
    for k, i in enumerate(mine):
        nbytes = int(ev.nbytes[i])
        if nbytes > 0:
            row_of_event[i] = col.get(owners.owner[i], len(top))
            delta[row_of_event[i], k] += nbytes
        elif nbytes < 0 and partner[i] >= 0:
            delta[row_of_event[int(partner[i])], k] += nbytes
    live = np.cumsum(delta, axis=1)
    allocated = ev.allocated[mine]
    before = allocated - live.sum(axis=0)
    keep = thin_indices(allocated, points)
    stacked = [row[keep].tolist() for row in live] + [before[keep].tolist()]
    nonzero = [k for k, row in enumerate(stacked) if any(row)]
    return Timeline(device=device, ts_ns=ev.ts_ns[mine][keep].tolist(), allocated=allocated[keep].tolist(),
                    reserved=ev.reserved[mine][keep].tolist(), owners=[names[k] for k in nonzero],
                    stacked=[stacked[k] for k in nonzero])


def thin_indices(values: np.ndarray, points: int) -> np.ndarray:
    """Indices of about `points` samples: per bucket its first, minimum and maximum (so the peak stays)."""
    n = len(values)
    if n <= points:
        return np.arange(n)
    size = max(1, (3 * n) // points)
    keep: set[int] = {n - 1}
    for lo in range(0, n, size):
        chunk = values[lo:lo + size]
        keep.update((lo, lo + int(np.argmin(chunk)), lo + int(np.argmax(chunk))))
    return np.asarray(sorted(keep), dtype=np.int64)


def compare_peaks(run: MemoryReport, baseline: MemoryReport) -> list[PeakDelta]:
    """Each device's peak in `run` against `baseline` and, by owner op and by module, what was live at the two
    peaks (each breakdown sums to its peak, so the deltas sum to the peak's delta)."""
    base = {p["device"]: p for p in baseline["peaks"]}
    rows: list[PeakDelta] = []
    for peak in run["peaks"]:
        other = base.get(peak["device"])
        if other is None:
            continue
        rows.append(PeakDelta(device=peak["device"], bytes=peak["bytes"], baseline_bytes=other["bytes"],
                              delta=peak["bytes"] - other["bytes"],
                              by_owner=_deltas(peak["by_owner"], other["by_owner"]),
                              by_module=_deltas(peak["by_module"], other["by_module"])))
    return rows


def _deltas(run: list[OwnerBytes], baseline: list[OwnerBytes]) -> list[OwnerDelta]:
    mine = {r["owner"]: r["bytes"] for r in run}
    theirs = {r["owner"]: r["bytes"] for r in baseline}
    owners = [OwnerDelta(owner=o, bytes=mine.get(o, 0), baseline_bytes=theirs.get(o, 0),
                         delta=mine.get(o, 0) - theirs.get(o, 0)) for o in sorted(set(mine) | set(theirs))]
    return sorted(owners, key=lambda r: (-abs(r["delta"]), r["owner"]))
