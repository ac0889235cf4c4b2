"""Ingest orchestration: inputs -> members -> per-format parsers -> one TraceBuilder -> tables.

Which parser handles which format is a table (PARSERS); formats we keep but cannot read get a
warning that says what to do with them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.chrome import parse_chrome
from explorer.ingest.detect import Format, detect_format
from explorer.ingest.sources import Inputs, Member
from explorer.model.tables import IngestedTrace

log = logging.getLogger(__name__)

Parser = Callable[[bytes, str, TraceBuilder, str], dict[str, Any]]
Progress = Callable[[float, str], None]

PARSERS: dict[Format, Parser] = {Format.CHROME: parse_chrome}

NEURON_BINARY_HINT = (
    "undocumented Neuron binary kept as an artifact; convert it with "
    "`neuron-explorer view --output-format json` (or `--output-format parquet`) and upload the result"
)
UNSUPPORTED: dict[Format, str] = {
    Format.CHAKRA_ET: "PyTorch execution trace (Chakra ET) is not a timeline; upload the Kineto trace.json beside it",
    Format.MEMORY_TIMELINE: "export_memory_timeline raw output is not a timeline; upload the Kineto trace.json",
    Format.BINARY: NEURON_BINARY_HINT,
    Format.UNKNOWN: "not a recognized trace format",
}


def register_parser(fmt: Format, parser: Parser) -> None:
    PARSERS[fmt] = parser


def ingest_inputs(inputs: Inputs, progress: Progress | None = None) -> IngestedTrace:
    """Parse every member into one run. Raises BadTrace when nothing usable is left."""
    builder = TraceBuilder()
    for name, why in inputs.skipped:
        builder.warn("skipped_file", f"{name}: {why}", 1, name)
    parsed: list[tuple[Member, Format, dict[str, Any]]] = []
    errors: list[BadTrace] = []
    total = sum(len(m.data) for m in inputs.members) or 1
    done = 0
    readable = [m for m in inputs.members if detect_format(m.data) in PARSERS]
    multi = len(readable) > 1
    for member in inputs.members:
        fmt = detect_format(member.data)
        parser = PARSERS.get(fmt)
        if parser is None:
            if not member.data:
                errors.append(BadTrace(member.name, "the file is empty (0 bytes)"))
                builder.warn("empty_file", f"{member.name}: empty file (0 bytes)", 1, member.name)
            else:
                builder.warn("unreadable_file", f"{member.name}: {UNSUPPORTED[fmt]}", 1, member.name)
            continue
        instance = member.name if multi else ""
        try:
            meta = parser(member.data, member.name, builder, instance)
        except BadTrace as exc:
            if not multi:
                raise
            errors.append(exc)
            builder.warn("unreadable_file", exc.message, 1, member.name)
            continue
        parsed.append((member, fmt, meta))
        done += len(member.data)
        if progress:
            progress(min(0.9, 0.9 * done / total), f"parsed {member.name}")
    if not parsed:
        if errors:
            raise errors[0]
        names = ", ".join(m.name for m in inputs.members) or "the upload"
        hints = "; ".join(f"{w.message}" for w in builder.warnings.values()) or "no files"
        raise BadTrace(names, f"nothing readable: {hints}")
    _label_instances(builder, parsed)
    if progress:
        progress(0.92, "building tables")
    trace = builder.finish()
    trace.meta["files"] = [
        {"name": m.name, "format": fmt.value, **{k: v for k, v in meta.items() if k != "base_ns"}}
        for m, fmt, meta in parsed
    ]
    return trace


def _label_instances(builder: TraceBuilder, parsed: list[tuple[Member, Format, dict[str, Any]]]) -> None:
    """Several trace files in one run: name each source by its rank where the trace says it."""
    if len(parsed) < 2:
        return
    meta_by_name = {member.name: meta for member, _fmt, meta in parsed}
    for src, name in enumerate(builder.sources):
        meta = meta_by_name.get(name, {})
        dist = meta.get("distributed_info")
        rank = dist.get("rank") if isinstance(dist, dict) else None
        if not builder.instances.get(src) or builder.instances.get(src) == name:
            builder.instances[src] = f"rank {rank}" if rank is not None else name
