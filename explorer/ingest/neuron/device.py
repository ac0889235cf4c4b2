"""Device profiles of a Neuron Parquet export: the tables of each export folder gathered while the files
are parsed (split tables joined), named from `DeviceProfileList`, checked against the schema version, and
linked to their `nc_exec_running` slice once the system timeline is built. Column work: neuron_columns.py.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.ingest.builder import TraceBuilder
from explorer.ingest.neuron.columns import Warn, normalise_table, sort_table
from explorer.ingest.neuron.rules import nc_of
from explorer.model.device import NO_SLICE, DeviceProfile
from explorer.model.neuron_schema import EXPORT_TABLES, SCHEMA_MAJOR, fields_of, major_version
from explorer.model.tables import IngestedTrace, Warning_

log = logging.getLogger(__name__)

EXEC_SLICE = "nc_exec_running"
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")


@dataclass
class _Part:
    part: int
    filename: str
    table: pa.Table


@dataclass
class DeviceState:
    """Per-builder: device tables by export folder and table name, and every `DeviceProfileList` row."""

    folders: dict[str, dict[str, list[_Part]]] = field(default_factory=dict)
    profile_list: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (folder, row)
    summaries: list[DeviceProfile] = field(default_factory=list)  # Summary-only profiles (neuron_summary.py)


def device_state(builder: TraceBuilder) -> DeviceState:
    return builder.extension("neuron_device", DeviceState)


def folder_of(filename: str) -> str:
    return str(PurePosixPath(filename).parent)


def stash_table(builder: TraceBuilder, filename: str, table_name: str, part: int, table: pa.Table) -> None:
    """Keep one file of a device table (normalised) until every file of the upload has been read."""
    warn = _warner(builder)
    stored = normalise_table(table_name, table, filename, warn)
    state = device_state(builder)
    state.folders.setdefault(folder_of(filename), {}).setdefault(table_name, []).append(
        _Part(part, filename, stored))


def stash_profile_list(builder: TraceBuilder, filename: str, table: pa.Table) -> int:
    rows = table.to_pylist()
    device_state(builder).profile_list.extend((folder_of(filename), row) for row in rows)
    return len(rows)


def collect_device_profiles(builder: TraceBuilder) -> list[DeviceProfile]:
    """Every export folder holding device tables becomes one profile (before builder.finish())."""
    state = device_state(builder)
    profiles: list[DeviceProfile] = []
    for folder, tables in sorted(state.folders.items()):
        _check_schema_fields(builder, folder, tables.get("SchemaFields", []))
        joined = {name: t for name, parts in sorted(tables.items()) if name not in EXPORT_TABLES
                  if (t := _join_parts(builder, name, parts)) is not None}
        if joined:
            profiles.append(_profile(builder, folder, joined))
    profiles += state.summaries
    _identify(builder, profiles, state.profile_list)
    return profiles


def _join_parts(builder: TraceBuilder, name: str, parts: list[_Part]) -> pa.Table | None:
    """Split tables (`Instruction_0`, `Instruction_1`, ...) in part order; a part that does not fit the
    others is left out with a warning naming its file."""
    parts = sorted(parts, key=lambda p: (p.part, p.filename))
    kept = [parts[0]]
    for p in parts[1:]:
        try:
            pa.concat_tables([kept[0].table, p.table], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            builder.warn("unreadable_device_table", f"{p.filename}: this part of the {name} table does not fit "
                         f"its other parts and was left out ({exc})", 1, p.filename)
            continue
        kept.append(p)
    table = pa.concat_tables([p.table for p in kept], promote_options="permissive")
    return sort_table(name, table.combine_chunks())


def _profile(builder: TraceBuilder, folder: str, tables: dict[str, pa.Table]) -> DeviceProfile:
    meta = _first_row(tables.get("Metadata"))
    version = str(meta.get("profile_schema_version") or "")
    major = major_version(version) if version else None
    if version and major != SCHEMA_MAJOR:
        builder.warn("neuron_schema_version", f"{folder}: device profile schema version {version} is not "
                     f"{SCHEMA_MAJOR}.x, the version this explorer reads; fields may be missing or renamed "
                     "and its tables may read wrongly", 1, folder)
    elif not version:
        builder.warn("neuron_schema_version", f"{folder}: the device profile has no Metadata."
                     "profile_schema_version; read as schema 7", 1, folder)
    start, end = _span(tables, meta)
    name = display_name(folder)
    return DeviceProfile(profile_id="", name=str(meta.get("profile_name") or name), source=folder, tables=tables,
                         nc_id=_int(meta.get("neuroncore_idx")), start_ns=start, end_ns=end, schema_version=version)


def display_name(folder: str) -> str:
    """`profiles/global/rmsnorm@latest` -> `rmsnorm`; an archive's root -> the archive's name."""
    base = PurePosixPath(folder).name if folder not in ("", ".") else "device"
    for suffix in _ARCHIVE_SUFFIXES:
        base = base.removesuffix(suffix)
    return base.rsplit("@", 1)[0] if "@" in base else base


def _span(tables: dict[str, pa.Table], meta: dict[str, Any]) -> tuple[int, int]:
    """Metadata's hardware span, else ExecutionInfo's, else the extent of the timed rows."""
    first, last = _int(meta.get("first_hw_timestamp")), _int(meta.get("last_hw_timestamp"))
    if 0 <= first <= last:
        return first, last
    info = tables.get("ExecutionInfo")
    if info is not None and info.num_rows:
        lo, hi = pc.min(info.column("execution_start_ts")).as_py(), pc.max(info.column("execution_end_ts")).as_py()
        if lo is not None and hi is not None and lo <= hi:
            return int(lo), int(hi)
    starts = [v for t in tables.values() if "start_ts" in t.column_names
              if (v := pc.min(t.column("start_ts")).as_py()) is not None]
    ends = [v for t in tables.values() if "end_ts" in t.column_names
            if (v := pc.max(t.column("end_ts")).as_py()) is not None]
    return (int(min(starts)), int(max(ends))) if starts and ends else (0, 0)


def _identify(builder: TraceBuilder, profiles: list[DeviceProfile], listed: list[tuple[str, dict[str, Any]]]) -> None:
    """Name each profile from its DeviceProfileList row (by name, else the one row of its own folder,
    else the only row of the upload) and give it a stable, folder-safe id."""
    by_name = {str(row.get("device_profile_name")): row for _folder, row in listed}
    used: set[str] = set()
    for p in profiles:
        own = [row for folder, row in listed if folder == p.source]
        row = by_name.get(display_name(p.source)) or by_name.get(p.name) or (own[0] if len(own) == 1 else None) \
            or (listed[0][1] if len(listed) == 1 and len(profiles) == 1 else None)
        if row is not None:
            p.name = str(row.get("device_profile_name") or p.name)
            p.instance_id = str(row.get("instance_id") or "")
            p.process_id, p.session_id, p.model_id = (_int(row.get(k)) for k in ("process_id", "session_id",
                                                                                  "model_id"))
            p.nc_id = _int(row.get("nc_id")) if row.get("nc_id") is not None else p.nc_id
        p.profile_id = _unique_id(p.name, used)
        used.add(p.profile_id)
    names = {p.name for p in profiles}
    missing = sorted({str(row.get("device_profile_name")) for _f, row in listed} - names)
    if missing:
        builder.warn("device_profile_missing", "DeviceProfileList names device profiles whose tables are not in "
                     f"the upload: {', '.join(missing[:10])}", len(missing))


def _unique_id(name: str, used: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "profile"
    candidate, n = base, 1
    while candidate in used:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _check_schema_fields(builder: TraceBuilder, folder: str, parts: list[_Part]) -> None:
    """SchemaFields lists what the export wrote: fields of known tables this explorer does not know
    are a sign of a newer schema, said once per folder."""
    unknown: set[str] = set()
    for p in parts:
        if not {"table_name", "field_name"} <= set(p.table.column_names):
            continue
        for table, name in zip(p.table.column("table_name").to_pylist(), p.table.column("field_name").to_pylist(),
                               strict=True):
            known = {f.name for f in fields_of(str(table))}
            if known and name not in known:
                unknown.add(f"{table}.{name}")
    if unknown:
        builder.warn("neuron_schema_fields", f"{folder}: SchemaFields lists {len(unknown)} field(s) this explorer "
                     f"does not know ({', '.join(sorted(unknown)[:8])}); they are stored but not read",
                     len(unknown), folder)


def span_device_profiles(profiles: list[DeviceProfile], trace: IngestedTrace) -> None:
    """A run of device profiles alone (no system events) spans its profiles, so that its timeline (origin
    and span) shows their tracks."""
    if profiles and trace.tables["slices"].num_rows == 0:
        trace.meta["start_ns"] = min(p.start_ns for p in profiles)
        trace.meta["end_ns"] = max(p.end_ns for p in profiles)


def link_device_profiles(profiles: list[DeviceProfile], trace: IngestedTrace) -> None:
    """Each profile's `nc_exec_running` slice: same instance, process and NeuronCore where both sides say
    so, overlapping the profile's span the most (after builder.finish(), when slice ids exist)."""
    slices = trace.tables["slices"]
    if not profiles or slices.num_rows == 0:
        return
    execs = slices.filter(pc.equal(slices.column("name"), EXEC_SLICE)).select(
        ["slice_id", "ts_ns", "dur_ns"]).to_pylist()
    args = trace.slice_args_of(np.asarray([r["slice_id"] for r in execs], dtype=np.int64)).to_pylist()
    for row, text in zip(execs, args, strict=True):
        row["fields"] = _args(text)
    for p in profiles:
        best, best_overlap = NO_SLICE, -1
        for row in execs:
            if not _same_core(p, row["fields"]):
                continue
            overlap = min(p.end_ns, row["ts_ns"] + row["dur_ns"]) - max(p.start_ns, row["ts_ns"])
            if overlap >= 0 and overlap > best_overlap:
                best, best_overlap = int(row["slice_id"]), overlap
        p.system_slice_id = best
    unlinked = [p.name for p in profiles if p.system_slice_id == NO_SLICE]
    if execs and unlinked:  # after finish(): the run's warnings are a list by now
        trace.warnings.append(Warning_("device_profile_unlinked", "device profiles that match no nc_exec_running "
                                       "slice by NeuronCore, process and time span (shown as runs of their own): "
                                       + ", ".join(unlinked[:10]), len(unlinked)))


def _same_core(p: DeviceProfile, fields: dict[str, Any]) -> bool:
    nc = nc_of(fields)
    checks = ((p.nc_id, int(nc) if nc else -1), (p.process_id, _int(fields.get("process_id"))),
              (p.model_id, _int(fields.get("model_id"))))
    if any(mine >= 0 and theirs >= 0 and mine != theirs for mine, theirs in checks):
        return False
    instance = str(fields.get("instance_id") or "")
    return not (p.instance_id and instance and p.instance_id != instance)


def _args(text: object) -> dict[str, Any]:
    try:
        value = json.loads(str(text))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _first_row(table: pa.Table | None) -> dict[str, Any]:
    if table is None or table.num_rows == 0:
        return {}
    row: dict[str, Any] = table.slice(0, 1).to_pylist()[0]
    return row


def _int(value: object) -> int:
    if isinstance(value, bool) or value is None:
        return -1
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return -1


def _warner(builder: TraceBuilder) -> Warn:
    def warn(code: str, message: str, count: int) -> None:
        builder.warn(code, message, count)
    return warn
