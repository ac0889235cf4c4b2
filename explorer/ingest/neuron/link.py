"""Join Neuron system events with the framework trace of the same run, before the builder finishes: one
absolute clock per scope, and links framework op -> runtime call -> nrta_execute_schedule ->
nc_exec_running from explicit keys, falling back to time containment in the same process only where none
exists (counted)."""

from __future__ import annotations

import bisect
import logging
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from explorer.ingest.builder import RawSlices, TraceBuilder
from explorer.ingest.chrome.feed import decode_args
from explorer.ingest.neuron.rules import LINK_FIELDS, NeuronEvent, NeuronState, Source, state_of
from explorer.model.lanes import LANE_ORDER, FlowKind, Lane
from explorer.model.tables import IngestedTrace, Warning_

log = logging.getLogger(__name__)

# Kineto categories of the framework stream: they get their op from the op with the same External id
STREAM_CATEGORIES = frozenset({"privateuse1_driver"})
NEURON_KINETO_CATEGORIES = frozenset({"privateuse1_runtime", "privateuse1_driver"})
LANE_RANK = {Source.FRAMEWORK: 0, Source.RUNTIME: 1, Source.HARDWARE: 2, Source.OTHER: 3}
SCAN_BACK = 64  # how far back to look for an enclosing interval among sorted starts


def finalize_neuron(builder: TraceBuilder) -> None:
    """Run once after every file of a run is parsed (pipeline), before builder.finish()."""
    state = state_of(builder)
    if not state.neuron_srcs:
        if builder.categories() & NEURON_KINETO_CATEGORIES:
            builder.warn("neuron_no_system_profile", "the framework trace has Neuron (PrivateUse1) events but no "
                         "Neuron system profile was given: runtime and hardware lanes and device time are missing; "
                         "export it with `neuron-explorer view --output-format json` (or parquet) and add it")
        return
    _align_clocks(builder, state, builder.raw_slices())
    raw = builder.raw_slices()
    _Linker(builder, state, raw).run()


def report_unattributed(builder: TraceBuilder, trace: IngestedTrace) -> None:
    """After finish(): say how many Neuron device executions reach no framework op through the links."""
    if not state_of(builder).neuron_srcs:
        return
    slices = trace.tables["slices"]
    cat = slices.column("cat").to_numpy(zero_copy_only=False)
    op_id = slices.column("op_id").to_numpy()
    count = int(np.count_nonzero((cat == Source.HARDWARE.value) & (op_id < 0)))
    if count:
        trace.warnings.append(Warning_("unlinked_device", "Neuron hardware events not linked to any framework op "
                                       "(their device time is not attributed to an op)", count))
    links = trace.meta.get("neuron_links")
    if isinstance(links, dict):
        links["unattributed"] = count


def _src_spans(raw: RawSlices) -> dict[int, tuple[int, int]]:
    if len(raw.ts_ns) == 0:
        return {}
    src = raw.thread_src[raw.thread]
    spans: dict[int, tuple[int, int]] = {}
    for s in np.unique(src).tolist():
        m = src == s
        spans[int(s)] = (int(raw.ts_ns[m].min()), int((raw.ts_ns[m] + raw.dur_ns[m]).max()))
    return spans


def _align_clocks(builder: TraceBuilder, state: NeuronState, raw: RawSlices) -> None:
    """Within a scope, system events that share no time with the framework trace are moved so both
    start together; the warning says by how much, so nobody mistakes it for a measured alignment."""
    spans = _src_spans(raw)
    scopes: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for src in spans:
        scope = state.scope_of_src.get(src, "")
        scopes[scope][1 if src in state.neuron_srcs else 0].append(src)
    for scope, (framework, system) in scopes.items():
        if not framework or not system:
            continue
        f_start = min(spans[s][0] for s in framework)
        f_end = max(spans[s][1] for s in framework)
        s_start = min(spans[s][0] for s in system)
        s_end = max(spans[s][1] for s in system)
        if s_start <= f_end and f_start <= s_end:
            continue
        delta = f_start - s_start
        builder.shift_sources(set(system), delta)
        where = scope or "the uploaded files"
        builder.warn("clock_mismatch", f"{where}: the Neuron system events ({_fmt_s(s_start)}..{_fmt_s(s_end)}) and "
                     f"the framework trace ({_fmt_s(f_start)}..{_fmt_s(f_end)}) do not overlap in time; the system "
                     f"events were shifted by {delta} ns to start with the framework trace's first event")


def _fmt_s(ns: int) -> str:
    return f"{ns / 1e9:.6f} s"


@dataclass
class _Interval:
    starts: list[int]
    ends: list[int]
    ids: list[int]


def _intervals(items: list[tuple[int, int, int]]) -> _Interval:
    items.sort()
    return _Interval([s for s, _e, _i in items], [e for _s, e, _i in items], [i for _s, _e, i in items])


def _enclosing(iv: _Interval, ts: int, end: int) -> int:
    """The innermost interval covering [ts, end] (latest start first), -1 when none."""
    hi = bisect.bisect_right(iv.starts, ts)
    for j in range(hi - 1, max(-1, hi - 1 - SCAN_BACK), -1):
        if iv.ends[j] >= end:
            return iv.ids[j]
    return -1


def _preceding(iv: _Interval, ts: int) -> int:
    hi = bisect.bisect_right(iv.starts, ts)
    return iv.ids[hi - 1] if hi else -1


class _Linker:
    def __init__(self, builder: TraceBuilder, state: NeuronState, raw: RawSlices) -> None:
        self.b = builder
        self.state = state
        self.raw = raw
        self.incoming: set[int] = set()
        self.by_raw = {ev.raw: ev for ev in state.events}
        self.explicit = 0
        self.inferred = 0

    def link(self, a: int, b: int, inferred: bool = False) -> None:
        if a < 0 or b < 0 or a == b or b in self.incoming:
            return
        from_lane = self.raw.lane[a]
        kind = FlowKind.LAUNCH if from_lane == LANE_ORDER[Lane.FRAMEWORK] else FlowKind.EXECUTE
        self.b.add_link(a, b, kind)
        self.incoming.add(b)
        self.inferred += inferred
        self.explicit += not inferred

    def scope(self, src: int, pid: str) -> tuple[str, str]:
        """Same process: one capture folder (whatever pids its files claim), else the same pid."""
        group = self.state.scope_of_src.get(src, "")
        return (group, "") if group else ("", pid)

    def run(self) -> None:
        self._by_flow_and_parent()
        self._by_keys()
        self._fallback()
        if self.inferred:
            self.b.warn("inferred_links", "links from framework ops to Neuron runtime/hardware events inferred by "
                        "time containment in the same process (the events carry no flow_id, nrt_sequence_id, "
                        "framework_stream_id or External id)", self.inferred)
        self.b.meta["neuron_links"] = {"explicit": self.explicit, "inferred": self.inferred}

    def _by_flow_and_parent(self) -> None:
        chains: dict[tuple[int, str], list[NeuronEvent]] = defaultdict(list)
        ids: dict[tuple[int, str], int] = {}
        for ev in self.state.events:
            for flow in ev.flows:
                chains[(ev.src, flow)].append(ev)
            if ev.own_id:
                ids[(ev.src, ev.own_id)] = ev.raw
        ts = self.raw.ts_ns
        for members in chains.values():
            members.sort(key=lambda e: (LANE_RANK[e.source], int(ts[e.raw])))
            for a, b in zip(members, members[1:], strict=False):
                if LANE_RANK[a.source] < LANE_RANK[b.source]:
                    self.link(a.raw, b.raw)
        for ev in self.state.events:
            parent = ids.get((ev.src, ev.parent_id), -1) if ev.parent_id else -1
            if parent >= 0 and LANE_RANK[self.by_raw[parent].source] < LANE_RANK[ev.source]:
                self.link(parent, ev.raw)

    def _by_keys(self) -> None:
        """Cross-file keys: a Kineto event's args name the same sequence / stream / External id."""
        wanted = {kind for ev in self.state.events for kind, _v in ev.keys}
        targets: dict[tuple[tuple[str, str], str, str], int] = {}
        if not wanted:
            return
        raw = self.raw
        src_of = raw.thread_src[raw.thread] if len(raw.thread) else raw.thread
        fields = [f for f, kind in LINK_FIELDS.items() if kind in wanted]
        for i, args in enumerate(raw.args):
            src = int(src_of[i])
            if src in self.state.neuron_srcs or not any(f'"{f}"' in args for f in fields):
                continue
            decoded = decode_args(args)
            if not isinstance(decoded, dict):
                continue
            pid = self.b.thread_key(int(raw.thread[i]))[1]
            for f in fields:
                value = decoded.get(f)
                if value is not None and not isinstance(value, dict | list):
                    key = (self.scope(src, pid), LINK_FIELDS[f], str(value))
                    # prefer the runtime/driver call over the op that encloses it
                    if key not in targets or raw.is_op[targets[key]]:
                        targets[key] = i
        for ev in self.state.events:
            for kind, value in ev.keys:
                hit = targets.get((self.scope(ev.src, ev.pid), kind, value), -1)
                if hit >= 0 and ev.source is not Source.FRAMEWORK:
                    self.link(hit, ev.raw)
        self._stream_calls(src_of)

    def _stream_calls(self, src_of: np.ndarray) -> None:
        """Kineto's framework-stream events (privateuse1_driver) get their op by External id."""
        raw = self.raw
        ops = {(int(src_of[i]), int(raw.external_id[i])): i
               for i in np.nonzero(raw.is_op & (raw.external_id >= 0))[0].tolist()}
        for i, cat in enumerate(raw.cat):
            if cat in STREAM_CATEGORIES and raw.external_id[i] >= 0:
                self.link(ops.get((int(src_of[i]), int(raw.external_id[i])), -1), i)

    def _fallback(self) -> None:
        raw = self.raw
        src_of = raw.thread_src[raw.thread]
        ops: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
        for i in np.nonzero(raw.is_op)[0].tolist():
            pid = self.b.thread_key(int(raw.thread[i]))[1]
            ops[self.scope(int(src_of[i]), pid)].append((int(raw.ts_ns[i]), int(raw.ts_ns[i] + raw.dur_ns[i]), i))
        op_iv = {k: _intervals(v) for k, v in ops.items()}
        runtime: dict[tuple[tuple[str, str], str], list[tuple[int, int, int]]] = defaultdict(list)
        for ev in self.state.events:
            if ev.source is Source.RUNTIME:
                start = int(raw.ts_ns[ev.raw])
                runtime[(self.scope(ev.src, ev.pid), ev.nc)].append((start, start + int(raw.dur_ns[ev.raw]), ev.raw))
        rt_iv = {k: _intervals(v) for k, v in runtime.items()}
        for ev in sorted(self.state.events, key=lambda e: LANE_RANK[e.source]):
            if ev.raw in self.incoming or ev.source not in (Source.RUNTIME, Source.HARDWARE):
                continue
            scope = self.scope(ev.src, ev.pid)
            start = int(raw.ts_ns[ev.raw])
            end = start + int(raw.dur_ns[ev.raw])
            found = -1
            if ev.source is Source.HARDWARE and (scope, ev.nc) in rt_iv:
                iv = rt_iv[(scope, ev.nc)]
                found = _enclosing(iv, start, start)
                if found < 0:
                    found = _preceding(iv, start)  # device work runs after its schedule call returns
            if found < 0 and scope in op_iv:
                found = _enclosing(op_iv[scope], start, end if ev.source is Source.RUNTIME else start)
            self.link(found, ev.raw, inferred=True)
