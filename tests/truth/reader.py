"""An independent reading of Kineto / Chrome JSON traces: what the pages claim, computed straight from the
file with `json` + `decimal` (no `explorer`, no `api`), each number by the definition in its docstring.

Times are integer ns: `ts`/`dur` are µs by the Chrome trace format (`displayTimeUnit` only changes how a
viewer displays them), read as Decimal and scaled by 1000, rounded half away from zero past the ns digit;
a Kineto file's `baseTimeNanoseconds` (the clock its `ts` count from) is added to every `ts`.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

# Profiler bookkeeping, not work: excluded from the span (name -> where it comes from).
MARKERS: dict[str, str] = {
    "Record Window End": "libkineto ChromeTraceLogger::finalizeTrace: instant `i` s=g at the window's end",
    "Iteration Start: PyTorch Profiler": "libkineto ChromeTraceLogger::handleTraceSpan: instant at span start",
}
MARKER_PATTERNS: dict[str, str] = {
    r"^PyTorch Profiler \(\d+\)$": "libkineto handleTraceSpan: `X` cat Trace, pid Spans: the whole window",
    r"^Iteration Start: .*": "libkineto addIterationMarker: one per traced iteration (named after the trace)",
}
# Kineto's span marker category: cat "Trace", named "<trace name> (<iteration>)" (PyTorch Profiler (0), Test trace (0))
MARKER_CATS = frozenset({"trace"})

# Device executions (lower-cased cat): CUDA/ROCm Kineto, 2021-era Kineto, MTIA.
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "mtia_ccp_events"})
KERNEL_CATS = frozenset({"kernel"})
# Host ops a launch is attributed to (Kineto `cpu_op`, 2021-era `Operator`).
OP_CATS = frozenset({"cpu_op", "operator"})
# Host-side calls that launch device work (CUDA/HIP runtime and driver, 2021-era `Runtime`).
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime", "mtia_runtime", "xpu_runtime"})
COMM = re.compile(r"nccl|rccl|(?:^|[^a-z])(?:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast)"
                  r"(?:[^a-z]|$)", re.IGNORECASE)
STEP = re.compile(r"^ProfilerStep#\d+$")
# One collective's canonical name from an NCCL/RCCL kernel or a c10d op.
COLL_KERNEL = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)")
C10D_CALL = re.compile(r"^c10d::(\w+?)_?$")

US = Decimal(1000)


def ns(value: Any) -> int:
    """µs (Decimal, int or numeric text) -> integer ns, exact, half away from zero past the ns digit."""
    return int((Decimal(str(value)) * US).quantize(Decimal(1), ROUND_HALF_UP))


def read_doc(path: Path) -> Any:
    """The JSON document of a trace file (plain, gzip or a one-member zip); floats as Decimal."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    elif raw[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(path) as z:
            raw = z.read(z.namelist()[0])
    return json.loads(raw, parse_float=Decimal)


def events_of(doc: Any) -> list[dict[str, Any]]:
    """The event list: `traceEvents` of the object form, or the array form itself (dicts only)."""
    evs = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    return [e for e in evs if isinstance(e, dict)] if isinstance(evs, list) else []


def is_marker(e: dict[str, Any]) -> bool:
    """Profiler bookkeeping (MARKERS, MARKER_PATTERNS, cat Trace)."""
    name = str(e.get("name", ""))
    return (name in MARKERS or str(e.get("cat", "")).lower() in MARKER_CATS
            or any(re.match(p, name) for p in MARKER_PATTERNS))


@dataclass(frozen=True)
class Ev:
    """One complete (`X`) event in ns."""

    name: str
    cat: str  # lower-cased
    pid: str
    tid: str
    ts: int
    dur: int
    args: dict[str, Any]

    @property
    def end(self) -> int:
        return self.ts + self.dur


def complete_events(evs: Iterable[dict[str, Any]], base: int = 0) -> list[Ev]:
    """Every `X` event with a ts (dur missing = 0; ts + base), markers included; pid/tid as text."""
    out = []
    for e in evs:
        if e.get("ph") == "X" and e.get("ts") is not None:
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            out.append(Ev(str(e.get("name", "")), str(e.get("cat", "")).lower(), str(e.get("pid")),
                          str(e.get("tid")), base + ns(e["ts"]), ns(e.get("dur") or 0), args))
    return out


@dataclass
class RankTrace:
    """One file of a run: its rank (distributedInfo.rank, else its position) and its events."""

    path: Path
    rank: int
    raw: list[dict[str, Any]]
    base: int = 0  # baseTimeNanoseconds
    xs: list[Ev] = field(default_factory=list)

    @property
    def device(self) -> list[Ev]:
        """Device executions: `X` events whose cat is in DEVICE_CATS."""
        return [e for e in self.xs if e.cat in DEVICE_CATS]


def load_rank(path: Path, position: int = 0) -> RankTrace:
    doc = read_doc(path)
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    rank = info.get("rank") if isinstance(info, dict) and isinstance(info.get("rank"), int) else position
    raw = events_of(doc)
    base = doc.get("baseTimeNanoseconds") if isinstance(doc, dict) else None
    base_ns = int(base) if isinstance(base, int | Decimal) else 0
    return RankTrace(path, rank, raw, base_ns, complete_events(raw, base_ns))


# ---- span ----------------------------------------------------------------------------------------

def span(ranks: list[RankTrace]) -> tuple[int, int] | None:
    """(first, last) real moment over every file: X starts and ends, instants, counters and B/E events, all
    but the profiler markers (MARKERS); metadata (`M`) and flow (`s`/`t`/`f`) events are not events of work."""
    lo, hi = None, None
    for r in ranks:
        for e in r.raw:
            ph = e.get("ph")
            if ph not in ("X", "i", "I", "B", "E", "C") or e.get("ts") is None or is_marker(e):
                continue
            a = r.base + ns(e["ts"])
            b = a + (ns(e.get("dur") or 0) if ph == "X" else 0)
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
    return None if lo is None else (lo, hi if hi is not None else lo)


# ---- interval arithmetic --------------------------------------------------------------------------

def union(intervals: Iterable[tuple[int, int]], lo: int | None = None, hi: int | None = None) -> list[tuple[int, int]]:
    """The sorted disjoint union of [a, b) intervals, clipped to [lo, hi) when given; empty ones dropped."""
    out: list[tuple[int, int]] = []
    for a, b in sorted((a if lo is None else max(a, lo), b if hi is None else min(b, hi)) for a, b in intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def length(segments: Iterable[tuple[int, int]]) -> int:
    return sum(b - a for a, b in segments)


def minus(segs: list[tuple[int, int]], cut: list[tuple[int, int]]) -> int:
    """Length of a disjoint union `segs` outside the disjoint union `cut`."""
    return length(segs) - length(union(
        (max(a, c), min(b, d)) for a, b in segs for c, d in cut if max(a, c) < min(b, d)))


# ---- device busy ----------------------------------------------------------------------------------

def device_busy(ranks: list[RankTrace]) -> dict[tuple[int, str], int]:
    """Busy ns per device, a device being (rank, pid of its executions): the union of its device executions."""
    per: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for r in ranks:
        for e in r.device:
            per[(r.rank, e.pid)].append((e.ts, e.end))
    return {k: length(union(v)) for k, v in per.items()}


def device_total(ranks: list[RankTrace]) -> int:
    """Summed device execution time (durations, not a union)."""
    return sum(e.dur for r in ranks for e in r.device)


# ---- kernels ---------------------------------------------------------------------------------------

def kernel_totals(ranks: list[RankTrace]) -> dict[str, tuple[int, int]]:
    """Per device execution name over every rank: (calls, total ns)."""
    calls: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for r in ranks:
        for e in r.device:
            calls[e.name] += 1
            total[e.name] += e.dur
    return {n: (calls[n], total[n]) for n in calls}


# ---- steps and their split -------------------------------------------------------------------------

def is_comm(name: str) -> bool:
    """A communication execution by name: NCCL/RCCL kernels and collective names (all_reduce, ...)."""
    return bool(COMM.search(name))


def rank_steps(r: RankTrace) -> list[Ev]:
    """The rank's ProfilerStep#N annotations on its host threads (not their copies on device streams), by ts."""
    device_pids = {e.pid for e in r.device}
    return sorted((e for e in r.xs if STEP.match(e.name) and e.cat not in DEVICE_CATS
                   and e.cat != "gpu_user_annotation" and e.pid not in device_pids), key=lambda e: e.ts)


@dataclass(frozen=True)
class StepSplit:
    """One step of one rank: compute = union of non-communication kernels in the step; communication = the
    union of communication executions not under compute; other = the rest of the device union (memcpy,
    memset); idle = step time minus the union of every device execution of the rank in the step."""

    rank: int
    name: str
    ts: int
    dur_ns: int
    compute_ns: int
    communication_ns: int
    other_ns: int
    idle_ns: int


def step_split(r: RankTrace, step: Ev) -> StepSplit:
    lo, hi = step.ts, step.end
    dev = r.device
    comp = union(((e.ts, e.end) for e in dev if e.cat in KERNEL_CATS and not is_comm(e.name)), lo, hi)
    comm = union(((e.ts, e.end) for e in dev if is_comm(e.name)), lo, hi)
    every = union(((e.ts, e.end) for e in dev), lo, hi)
    comm_ns = minus(comm, comp)
    busy = length(every)
    return StepSplit(r.rank, step.name, step.ts, step.dur, length(comp), comm_ns,
                     busy - length(comp) - comm_ns, step.dur - busy)


def steps(ranks: list[RankTrace]) -> list[StepSplit]:
    """Every (rank, step) with its split, by rank then start."""
    return [step_split(r, s) for r in sorted(ranks, key=lambda r: r.rank) for s in rank_steps(r)]


@dataclass(frozen=True)
class RankSplit:
    """One rank over its window (the union of its steps: the Ranks page's numbers are the sums of the rank's rows
    on the Steps page, so time between two steps is in neither): compute = union of its non-communication
    work, comm = union of its communication, exposed = comm not under compute, idle = window minus the union
    of all its work. Work is its device executions (device mode), else its host ops (HOST_WORK_CATS, steps
    excluded: host mode, a gloo rank on CPU)."""

    mode: str
    window_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    idle_ns: int


HOST_WORK_CATS = frozenset({"cpu_op", "user_annotation", "python_function", "operator"})


def rank_split(r: RankTrace) -> RankSplit | None:
    """The rank's split (RankSplit), None when it has no steps."""
    steps_ = rank_steps(r)
    if not steps_:
        return None
    windows = union((s.ts, s.end) for s in steps_)
    work = r.device or [e for e in r.xs if e.cat in HOST_WORK_CATS and not STEP.match(e.name)]

    def inside(events: Iterable[Ev]) -> list[tuple[int, int]]:
        ivs = [(e.ts, e.end) for e in events]
        return union((max(a, lo), min(b, hi)) for lo, hi in windows for a, b in ivs)

    comm = inside(e for e in work if is_comm(e.name))
    comp = inside(e for e in work if not is_comm(e.name) and (not r.device or e.cat in KERNEL_CATS))
    busy = length(inside(work))
    window = length(windows)
    return RankSplit("device" if r.device else "host", window, length(comp), length(comm), minus(comm, comp),
                     window - busy)


# ---- op attribution --------------------------------------------------------------------------------

def launches(r: RankTrace) -> dict[int, Ev]:
    """Launch calls by correlation id: runtime/driver events (LAUNCH_CATS) with an integer `args.correlation`
    (the id the execution carries too in every Kineto version; the `ac2g` flows repeat the same pairing)."""
    out = {}
    for e in r.xs:
        c = e.args.get("correlation")
        if e.cat in LAUNCH_CATS and isinstance(c, int):
            out[c] = e
    return out


FRAME_CATS = frozenset({"python_function"})  # with_stack frames
ANNOTATION_CATS = frozenset({"user_annotation"})  # record_function ranges: ops of key_averages() too


def enclosing_ops(r: RankTrace, cats: frozenset[str] = OP_CATS) -> dict[tuple[str, str], list[Ev]]:
    """The events of `cats` (cpu ops by default) of each (pid, tid), by start then longest first."""
    per: dict[tuple[str, str], list[Ev]] = defaultdict(list)
    for e in r.xs:
        if e.cat in cats:
            per[(e.pid, e.tid)].append(e)
    for v in per.values():
        v.sort(key=lambda e: (e.ts, -e.dur))
    return per


def innermost(ops: list[Ev], starts: list[int], t: int) -> Ev | None:
    """The nearest enclosing op of moment t on a thread (ops properly nested, sorted by start then longest
    first): scanning back from the last op starting at or before t, the first that still runs at t."""
    for i in range(bisect.bisect_right(starts, t) - 1, -1, -1):
        if ops[i].end >= t:
            return ops[i]
    return None


UNATTRIBUTED = ""


def row_name(name: str) -> str:
    """key_averages()' row name: every `ProfilerStep#N` is one row, `ProfilerStep*`."""
    return "ProfilerStep*" if STEP.match(name) else name


def device_time_by_op(ranks: list[RankTrace]) -> dict[str, int]:
    """Device ns per launching op name, the rule issue 34 asks for (device time never leaves the op table):
    execution -> its launch by `args.correlation` -> on the launch's thread, the innermost enclosing op or
    record_function annotation when no Python frame sits between it and the launch (key_averages()' own rule:
    an NCCL kernel's time is `nccl:all_reduce`'s); when a frame is innermost (a library launching from Python),
    the nearest enclosing cpu op further up, else that frame; with neither op nor frame, the launch call itself.
    UNATTRIBUTED ("") only when no launch is linked."""
    out: Counter[str] = Counter()
    for r in ranks:
        by_corr = launches(r)
        kinds = {"op": enclosing_ops(r), "any": enclosing_ops(r, OP_CATS | ANNOTATION_CATS),
                 "frame": enclosing_ops(r, FRAME_CATS)}
        starts = {k: {key: [o.ts for o in v] for key, v in per.items()} for k, per in kinds.items()}

        def around(kind: str, key: tuple[str, str], t: int,
                   kinds: dict[str, dict[tuple[str, str], list[Ev]]] = kinds,
                   starts: dict[str, dict[tuple[str, str], list[int]]] = starts) -> Ev | None:
            return innermost(kinds[kind].get(key, []), starts[kind].get(key, []), t)

        for e in r.device:
            c = e.args.get("correlation")
            launch = by_corr.get(c) if isinstance(c, int) else None
            if launch is None:
                out[UNATTRIBUTED] += e.dur
                continue
            key = (launch.pid, launch.tid)
            op, frame = around("any", key, launch.ts), around("frame", key, launch.ts)
            if op is not None and (frame is None or (frame.ts <= op.ts and op.end <= frame.end)):
                out[row_name(op.name)] += e.dur  # no frame between the op and the launch
            else:
                out[row_name((around("op", key, launch.ts) or frame or launch).name)] += e.dur
    return dict(out)


# ---- collectives and the straggler ------------------------------------------------------------------

def canonical(name: str) -> str:
    """allreduce, allgather, ... from AllReduce / all_reduce / allreduce_."""
    return name.lower().replace("_", "").rstrip("_")


@dataclass(frozen=True)
class Entry:
    """A rank's entry into one collective: when its host called it."""

    rank: int
    name: str
    entry_ns: int


def rank_collectives(r: RankTrace) -> list[Entry]:
    """A rank's collectives in order. NCCL/RCCL kernel: entry = start of its launch (by correlation), else
    the kernel's start. Host-only gloo (no such kernels): each `c10d::<op>` cpu op on the calling thread,
    entry = its start."""
    by_corr = launches(r)
    out = []
    for e in sorted(r.device, key=lambda e: e.ts):
        m = COLL_KERNEL.match(e.name)
        if m:
            c = e.args.get("correlation")
            launch = by_corr.get(c) if isinstance(c, int) else None
            out.append(Entry(r.rank, canonical(m.group(1)), launch.ts if launch else e.ts))
    if out:
        return out
    for e in sorted((e for e in r.xs if e.cat == "cpu_op"), key=lambda e: e.ts):
        m = C10D_CALL.match(e.name)
        if m and canonical(m.group(1)) in _GLOO_NAMES:
            out.append(Entry(r.rank, canonical(m.group(1)), e.ts))
    return out


_GLOO_NAMES = frozenset({"barrier", "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce",
                         "allgatherintotensorcoalesced", "reducescattertensorcoalesced", "gather", "scatter",
                         "alltoallbase", "allgatherbase", "reducescatterbase", "allreducecoalesced"})


def matched(ranks: list[RankTrace]) -> list[list[Entry]]:
    """The k-th collective of each name on every rank, grouped (only where every rank has a k-th)."""
    per = {r.rank: rank_collectives(r) for r in ranks}
    names = sorted({e.name for v in per.values() for e in v})
    out = []
    for name in names:
        lists = [[e for e in v if e.name == name] for v in per.values()]
        for k in range(min(len(x) for x in lists)):
            out.append(sorted((x[k] for x in lists), key=lambda e: e.rank))
    return out


def last_arriver(group: list[Entry]) -> int:
    """The rank with the latest entry (the lowest rank on a tie)."""
    latest = max(e.entry_ns for e in group)
    return min(e.rank for e in group if e.entry_ns == latest)


def straggler(ranks: list[RankTrace]) -> int | None:
    """The rank whose late arrivals made the others wait longest: the sum, over the matched collectives it was
    last to, of its entry minus each other rank's entry; then the one last most often, then the lowest rank.
    None with fewer than two ranks or no matched collective."""
    groups = [g for g in matched(ranks) if len(g) > 1]
    if not groups:
        return None
    counts: Counter[int] = Counter()
    waited: Counter[int] = Counter()
    for g in groups:
        last = last_arriver(g)
        latest = max(e.entry_ns for e in g)
        counts[last] += 1
        waited[last] += sum(latest - e.entry_ns for e in g)
    return min(counts, key=lambda r: (-waited[r], -counts[r], r))


# ---- one run --------------------------------------------------------------------------------------

def load_run(paths: list[Path]) -> list[RankTrace]:
    """A run's files (one per rank), ranks from distributedInfo or file order."""
    return [load_rank(p, i) for i, p in enumerate(sorted(paths))]
