"""Shared core of the Neuron system-profile parsers: which lane an event belongs to (a declarative
table), how tracks are named (`PID/framework/TID`, `neuron_rt/NC:n`, `neuron_hw/NC:n`), and the link
keys each event carries. Format decoding lives in neuron_json.py / neuron_parquet.py, joining in
neuron_link.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

from explorer.ingest.builder import TraceBuilder
from explorer.ingest.times import MAX_TS_NS, to_ns
from explorer.model.lanes import Lane

# time fields are decoded as int or Decimal (never float); Decimals go back into args as JSON numbers
ARGS_ENCODER = msgspec.json.Encoder(decimal_format="number")


class Source(StrEnum):
    """Neuron's `trace_event_source`; also the event category, so lanes.py rules apply."""

    FRAMEWORK = "framework"
    RUNTIME = "neuron_rt"
    HARDWARE = "neuron_hw"
    OTHER = "neuron"


SOURCE_LANE: dict[Source, Lane] = {
    Source.FRAMEWORK: Lane.FRAMEWORK, Source.RUNTIME: Lane.RUNTIME,
    Source.HARDWARE: Lane.HARDWARE, Source.OTHER: Lane.OTHER,
}

# values seen in source / category fields -> source
SOURCE_ALIASES: dict[str, Source] = {
    "framework": Source.FRAMEWORK, "pytorch": Source.FRAMEWORK, "torch": Source.FRAMEWORK,
    "neuron_rt": Source.RUNTIME, "runtime": Source.RUNTIME, "nrt": Source.RUNTIME,
    "neuron_hw": Source.HARDWARE, "hardware": Source.HARDWARE, "device": Source.HARDWARE,
}
SOURCE_FIELDS = ("trace_event_source", "source", "category", "cat")


@dataclass(frozen=True)
class NameRule:
    """Event name pattern -> source, used when an event does not say its source."""

    pattern: str
    source: Source
    note: str


NAME_RULES: tuple[NameRule, ...] = (
    NameRule(r"^nc_exec", Source.HARDWARE, "NeuronCore executing a model (nc_exec_running)"),
    NameRule(r"^cc_", Source.HARDWARE, "collective communication on the device (cc_running)"),
    NameRule(r"^(dma|qdma)_", Source.HARDWARE, "device DMA activity"),
    NameRule(r"^nrta_", Source.RUNTIME, "runtime async API (nrta_execute_schedule)"),
    NameRule(r"^nrt_", Source.RUNTIME, "runtime API (nrt_execute, nrt_load)"),
    NameRule(r"^kbl_", Source.RUNTIME, "kernel-bypass layer (kbl_exec_pre, kbl_exec_post)"),
    NameRule(r"^(aten|torch|prim|c10d|neuron)::", Source.FRAMEWORK, "PyTorch op names"),
)
_NAME_RES = tuple((re.compile(rule.pattern), rule.source) for rule in NAME_RULES)

# field names that carry an event's NeuronCore, in order of preference
NC_FIELDS = ("lnc_idx", "nc_idx", "logical_nc_idx", "device_core_idx", "nc_id")
# link keys: field name -> key kind (the same kind joins across files)
LINK_FIELDS: dict[str, str] = {
    "nrt_sequence_id": "seq", "sequence_id": "seq", "framework_stream_id": "stream",
    "External id": "ext", "external_id": "ext",
}
FLOW_FIELDS = ("flow_id", "flow_ids")


def source_of(fields: dict[str, Any], name: str) -> Source:
    """The event's source from its source/category field, else from its name, else OTHER."""
    for key in SOURCE_FIELDS:
        value = fields.get(key)
        if isinstance(value, str) and value.lower() in SOURCE_ALIASES:
            return SOURCE_ALIASES[value.lower()]
    return source_from_name(name)


def source_from_name(name: str) -> Source:
    for pattern, source in _NAME_RES:
        if pattern.search(name):
            return source
    return Source.OTHER


def as_ns(value: object) -> int | None:
    """An integer nanosecond value from an int, a Decimal or a numeric string (exactly, rounded half away
    from zero); None when unusable. A binary float is refused: decoders must not produce one for a time."""
    return to_ns(value)


def nc_of(fields: dict[str, Any]) -> str:
    for key in NC_FIELDS:
        value = fields.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return str(value)
        if isinstance(value, str) and value.isdigit():
            return value
    return ""


def flow_ids_of(fields: dict[str, Any]) -> tuple[str, ...]:
    for key in FLOW_FIELDS:
        value = fields.get(key)
        if value is None:
            continue
        items = value if isinstance(value, list | tuple) else [value]
        return tuple(str(v) for v in items if v is not None and v != "" and v != -1)
    return ()


def link_keys_of(fields: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    keys = []
    for name, kind in LINK_FIELDS.items():
        value = fields.get(name)
        if value is not None and not isinstance(value, bool | dict | list) and value != -1 and value != "":
            keys.append((kind, str(value)))
    return tuple(keys)


@dataclass(slots=True)
class NeuronEvent:
    """What the linker needs of one Neuron slice (raw index into the builder)."""

    raw: int
    src: int
    pid: str
    source: Source
    nc: str
    flows: tuple[str, ...] = ()
    keys: tuple[tuple[str, str], ...] = ()
    own_id: str = ""
    parent_id: str = ""


@dataclass
class NeuronState:
    """Per-builder Neuron bookkeeping, filled by parsers, used by neuron_link.finalize_neuron."""

    events: list[NeuronEvent] = field(default_factory=list)
    neuron_srcs: set[int] = field(default_factory=set)
    scope_of_src: dict[int, str] = field(default_factory=dict)  # capture folder key; "" = loose files
    scope: str = ""  # the capture folder being parsed now
    default_pid: str = ""  # that folder's pid, for files that do not name their process
    skip_framework: bool = False  # a Kineto trace of the same process was given: it wins
    worker_gids: dict[int, set[int]] = field(default_factory=dict)  # source -> `worker_gid`s its events name


def state_of(builder: TraceBuilder) -> NeuronState:
    return builder.extension("neuron", NeuronState)


class NeuronSink:
    """Writes Neuron events of one file into the builder with Neuron Explorer's track grouping."""

    def __init__(self, builder: TraceBuilder, filename: str, instance: str) -> None:
        self.b = builder
        self.state = state_of(builder)
        self.filename = filename
        self.instance = instance
        self._srcs: dict[str, int] = {}
        self.stored = 0
        self.bad_time = 0
        self.other = 0
        self.skipped_framework = 0

    def src(self, instance: str = "") -> int:
        label = instance or self.instance
        src = self._srcs.get(label)
        if src is None:
            src = self.b.add_source(self.filename, label)
            self._srcs[label] = src
            self.state.neuron_srcs.add(src)
            self.state.scope_of_src[src] = self.state.scope
        return src

    def pid(self, value: object) -> str:
        if value is None or value == "" or isinstance(value, bool | dict | list):
            return self.state.default_pid or "0"
        return str(value)

    def thread(self, src: int, pid: str, source: Source, nc: str, tid: object) -> int:
        if source in (Source.RUNTIME, Source.HARDWARE) and nc:
            track = f"{source.value}/NC:{nc}"
        elif source is Source.FRAMEWORK:
            track = f"framework/{tid}" if tid not in (None, "") else "framework"
        else:
            track = f"{source.value}/{tid}" if tid not in (None, "") else source.value
        self.b.set_process_name(src, pid, f"PID {pid}")
        self.b.set_thread_name(src, pid, track, track)
        return self.b.thread(src, pid, track)

    def add(self, fields: dict[str, Any], name: str, ts_ns: int | None, dur_ns: int | None,
            *, instance: str = "", tid: object = None, own_id: str = "", parent_id: str = "") -> int:
        """One event; returns its raw index, or -1 when its time is unusable (counted, reported)."""
        if ts_ns is None or dur_ns is None or ts_ns + dur_ns >= MAX_TS_NS:
            self.bad_time += 1
            return -1
        source = source_of(fields, name)
        if source is Source.FRAMEWORK and self.state.skip_framework:
            self.skipped_framework += 1
            return -1
        self.other += source is Source.OTHER
        src = self.src(instance)
        pid = self.pid(fields.get("process_id", fields.get("pid")))
        nc = nc_of(fields)
        thread = self.thread(src, pid, source, nc, fields.get("thread_id", fields.get("tid")) if tid is None
                             else tid)
        gid = fields.get("worker_gid")
        if isinstance(gid, int) and not isinstance(gid, bool) and gid >= 0:
            self.state.worker_gids.setdefault(src, set()).add(gid)  # the worker's global id: its rank
        args = ARGS_ENCODER.encode(fields).decode()
        raw = self.b.add_slice(thread, source.value, name, ts_ns, dur_ns, args, lane=SOURCE_LANE[source])
        self.state.events.append(NeuronEvent(raw, src, pid, source, nc, flow_ids_of(fields),
                                             link_keys_of(fields), own_id, parent_id))
        self.stored += 1
        return raw

    def report(self) -> None:
        """Turn the counts gathered while parsing into warnings on the run."""
        if self.bad_time:
            self.b.warn("bad_time", "Neuron events with a missing, negative or out-of-range time or duration "
                        "(not stored)", self.bad_time, self.filename)
        if self.other:
            self.b.warn("neuron_unknown_source", "Neuron events whose lane could not be told from their source "
                        "or name (kept in lane 'other')", self.other, self.filename)
        if self.skipped_framework:
            self.b.warn("neuron_duplicate_framework", "framework events of the system profile that repeat the "
                        "process's Kineto trace.json (the Kineto events were kept)", self.skipped_framework,
                        self.filename)
