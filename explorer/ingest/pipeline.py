"""Ingest orchestration: inputs -> members -> per-format parsers -> one TraceBuilder -> tables.

Which parser handles which format is a table (PARSERS); formats we keep but cannot read get a
warning that says what to do with them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from explorer.errors import BadTrace
from explorer.ingest.alloc_snapshot import parse_alloc_snapshot
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.capture import (
    ProcessFolder,
    begin_member,
    end_member,
    find_process_folders,
    join_process_folder,
)
from explorer.ingest.chrome.decode import parse_chrome
from explorer.ingest.chrome.fast import parse_chrome_file
from explorer.ingest.clock import align_hosts
from explorer.ingest.detect import Format, detect_format
from explorer.ingest.limits import IngestLimits
from explorer.ingest.magic import describe_binary
from explorer.ingest.memory_timeline import parse_memory_timeline
from explorer.ingest.neuron.device import collect_device_profiles, link_device_profiles, span_device_profiles
from explorer.ingest.neuron.files import describe_neuron_binaries, neuron_binary_kind, parse_neuron_ls
from explorer.ingest.neuron.json_profile import parse_neuron_json, parse_neuron_nrt, parse_neuron_profile2
from explorer.ingest.neuron.link import finalize_neuron, report_unattributed
from explorer.ingest.neuron.parquet_profile import parse_neuron_parquet
from explorer.ingest.neuron.summary_text import parse_summary_text
from explorer.ingest.parallel import parsed_apart
from explorer.ingest.parts import Part, merge
from explorer.ingest.ranks import identify_ranks
from explorer.ingest.sources import Inputs, Member
from explorer.model.ranks import NO_RANK
from explorer.model.tables import IngestedTrace

log = logging.getLogger(__name__)

Parser = Callable[[bytes, str, TraceBuilder, str], dict[str, Any]]
Progress = Callable[[float, str], None]

PARSERS: dict[Format, Parser] = {
    Format.CHROME: parse_chrome,
    Format.NEURON_JSON: parse_neuron_json,
    Format.NEURON_PROFILE2: parse_neuron_profile2,
    Format.NEURON_NRT: parse_neuron_nrt,
    Format.PARQUET: parse_neuron_parquet,
    Format.ALLOC_SNAPSHOT: parse_alloc_snapshot,
    Format.MEMORY_TIMELINE: parse_memory_timeline,
    Format.NEURON_SUMMARY_TEXT: parse_summary_text,
    Format.NEURON_LS: parse_neuron_ls,
}

UNSUPPORTED: dict[Format, str] = {
    Format.CHAKRA_ET: "PyTorch execution trace (Chakra ET) is not a timeline; upload the Kineto trace.json beside it",
    Format.UNKNOWN: "not a recognized trace format",
}


def register_parser(fmt: Format, parser: Parser) -> None:
    PARSERS[fmt] = parser


def ingest_inputs(inputs: Inputs, progress: Progress | None = None, limits: IngestLimits | None = None,
                  parallel: bool | None = None, *, parts: dict[int, Part] | None = None) -> IngestedTrace:
    """Parse every member into one run. Raises BadTrace when nothing usable is left.

    Members inside Neuron capture process folders (`<instance>_pid_<pid>/...`) are parsed folder by
    folder and joined into one process each (capture.py); Neuron events are linked to the framework
    trace after every file is read (neuron_link.py). The loose Chrome/Kineto files of a multi-file run
    are parsed in worker processes and merged in member order (parallel.py; `parallel` forces it on or
    off, None leaves it to parallel.use_parallel): the run is the same either way. `parts`: members already
    parsed elsewhere (a queue's parse jobs), by index in inputs.members; the rest are parsed here."""
    builder = TraceBuilder(limits)
    for name, why in inputs.skipped:
        builder.warn("skipped_file", f"{name}: {why}", 1, name)
    folders, loose = find_process_folders(inputs.members)
    plan: list[tuple[Member, ProcessFolder | None]] = [(m, None) for m in loose]
    plan += [(m, folder) for folder in folders for m in folder.members]
    run = _Parsing(builder, inputs, progress)
    chrome = [m for m in loose if run.formats[id(m)] is Format.CHROME]
    given = None if parts is None else {id(m): parts[i] for i, m in enumerate(inputs.members) if i in parts}
    apart: AbstractContextManager[dict[int, Part]] = nullcontext(given) if given is not None else parsed_apart(
        chrome, builder.limits, inputs.scratch, progress, parallel)
    with apart as parsed:
        for member, folder in plan:
            run.parse(member, folder, parsed.get(id(member)))
    for folder in folders:
        join_process_folder(builder, folder, run.metas)
    binaries = [m for m in inputs.members if run.formats[id(m)] is Format.BINARY]
    neuron_files = describe_neuron_binaries((m.name, m.size, m.head(1024)) for m in binaries)
    if not run.parsed and not (neuron_files and len(neuron_files) == len(inputs.members) and not run.errors):
        if run.errors:
            raise run.errors[0]
        raise BadTrace(_input_names(inputs), f"nothing readable: {_first_hints(builder)}")
    identify_ranks(builder, run.metas, folders)
    align_hosts(builder)
    _label_instances(builder, run.parsed)
    finalize_neuron(builder)
    device_profiles = collect_device_profiles(builder)
    if progress:
        progress(0.92, "building tables")
    trace = builder.finish()
    report_unattributed(builder, trace)
    link_device_profiles(device_profiles, trace)
    span_device_profiles(device_profiles, trace)
    trace.device_profiles = device_profiles
    trace.meta["files"] = [
        {"name": m.name, "format": fmt.value, **{k: v for k, v in meta.items() if k != "base_ns"}}
        for m, fmt, meta in run.parsed
    ]
    if neuron_files:  # NEFF / NTFF / .pb kept as artifacts: what they are and how to convert them
        trace.meta["neuron_files"] = neuron_files
    if folders:
        trace.meta["capture"] = [
            {"folder": f.key, "instance": f.instance, "pid": f.pid, "files": f.files, "binaries": f.binaries}
            for f in folders
        ]
    return trace


class _Parsing:
    """The per-file part of an ingest: detect, dispatch to a parser, collect metadata and errors.

    With several readable files one bad file becomes a warning and the rest still make the run;
    a lone file's error is the ingest's error."""

    def __init__(self, builder: TraceBuilder, inputs: Inputs, progress: Progress | None) -> None:
        self.builder = builder
        self.inputs = inputs
        self.progress = progress
        self.parsed: list[tuple[Member, Format, dict[str, Any]]] = []
        self.metas: dict[int, dict[str, Any]] = {}
        self.errors: list[BadTrace] = []
        self.formats = {id(m): _format_of(m) for m in inputs.members}
        self.multi = sum(1 for f in self.formats.values() if f in PARSERS) > 1
        self.total = sum(m.size for m in inputs.members) or 1
        self.done = 0

    def parse(self, member: Member, folder: ProcessFolder | None, part: Part | None = None) -> None:
        """Parse one member into the builder, or merge its part when a worker parsed it already."""
        builder, fmt = self.builder, self.formats[id(member)]
        parser = PARSERS.get(fmt)
        if parser is None:
            self._unreadable(member, folder, fmt)
            return
        instance = folder.instance if folder else member.name if self.multi else ""
        first_src = len(builder.sources)
        if folder is not None:
            begin_member(builder, folder, fmt)
        try:
            if part is not None:
                meta = merge(builder, part)
            elif fmt is Format.CHROME and member.path is not None:
                meta = parse_chrome_file(member.path, member.name, builder, instance, self.inputs.scratch)
            else:
                meta = parser(member.data, member.name, builder, instance)
        except BadTrace as exc:
            if not self.multi:
                raise
            self.errors.append(exc)
            builder.warn("unreadable_file", exc.message, 1, member.name)
            return
        finally:
            if folder is not None:
                end_member(builder, folder, member, fmt, range(first_src, len(builder.sources)))
        self.metas.update({src: meta for src in range(first_src, len(builder.sources))})
        self.parsed.append((member, fmt, meta))
        self.done += member.size
        if self.progress and part is None:  # parts reported their progress as the workers finished
            self.progress(min(0.9, 0.9 * self.done / self.total), f"parsed {member.name}")

    def _unreadable(self, member: Member, folder: ProcessFolder | None, fmt: Format) -> None:
        if member.size == 0:
            self.errors.append(BadTrace(member.name, "the file is empty (0 bytes)"))
            self.builder.warn("empty_file", f"{member.name}: empty file (0 bytes)", 1, member.name)
        elif folder is not None and fmt is Format.BINARY:
            folder.binaries.append(member.name)
        elif fmt is Format.BINARY and neuron_binary_kind(member.name, member.head(1024)):
            self.builder.warn("neuron_binary", f"{member.name}: {describe_binary(member.head(), member.name)}", 1,
                              member.name)
        elif fmt is Format.BINARY:
            self.builder.warn("unreadable_file", f"{member.name}: {describe_binary(member.head(), member.name)}", 1,
                              member.name)
        else:
            self.builder.warn("unreadable_file", f"{member.name}: {UNSUPPORTED[fmt]}", 1, member.name)


def _format_of(member: Member) -> Format:
    """The member's format by its bytes; an unknown file named `.ntff` / `.neff` / `.pb` is a Neuron binary (they
    have no published header: a mostly printable one would otherwise read as an unknown text file)."""
    fmt = detect_format(member.head())
    if fmt is Format.UNKNOWN and member.size and neuron_binary_kind(member.name, b""):
        return Format.BINARY
    return fmt


def _input_names(inputs: Inputs) -> str:
    """The files an error is about: the members, else (all skipped) the files as given; a count when long."""
    names = [m.name for m in inputs.members] or [a.name for a in inputs.artifacts]
    text = ", ".join(names)
    if len(text) < 200:
        return text or "the upload"
    return f"{names[0]} and {len(names) - 1} more files"


def _first_hints(builder: TraceBuilder, most: int = 3) -> str:
    hints = [w.message for w in builder.warnings.values()]
    more = f"; and {len(hints) - most} more" if len(hints) > most else ""
    return "; ".join(hints[:most]) + more if hints else "no files"


def _label_instances(builder: TraceBuilder, parsed: list[tuple[Member, Format, dict[str, Any]]]) -> None:
    """Several trace files in one run: name each source by its rank where the trace or its name says it."""
    if len(parsed) < 2:
        return
    for src, name in enumerate(builder.sources):
        rank = builder.threads.ranks.get(src, NO_RANK)
        if not builder.instances.get(src) or builder.instances.get(src) == name:
            builder.instances[src] = f"rank {rank}" if rank != NO_RANK else name
