"""Neuron capture folders (`<instance-id>_pid_<pid>/<timestamp>/...` in a folder, .zip or .tar.gz): each
process folder's framework trace and system events grouped into one process of the run, undocumented
binaries listed with how to convert them, tracks named. Parsing stays in the format parsers."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from explorer.ingest.builder import TraceBuilder
from explorer.ingest.detect import Format
from explorer.ingest.neuron.rules import state_of
from explorer.ingest.sources import Member
from explorer.model.lanes import LANE_ORDER, Lane

log = logging.getLogger(__name__)

_PROCESS_DIR = re.compile(r"^(?P<instance>.+)_pid_(?P<pid>\d+)$")
_RANK_FILE = re.compile(r"^neuron_framework_trace_rank_(?P<rank>\d+)\.json$")
CONVERT_HINT = ("convert them with `neuron-explorer view --output-format json` (or `--output-format parquet`) "
                "and add the output to the capture")
FRAMEWORK_FORMATS = frozenset({Format.CHROME})
SYSTEM_FORMATS = frozenset({Format.NEURON_JSON, Format.NEURON_PROFILE2, Format.NEURON_NRT, Format.PARQUET})


@dataclass
class ProcessFolder:
    """One `<instance>_pid_<pid>` folder of a capture and what became of its files."""

    key: str  # the folder's path, unique within the upload
    instance: str
    pid: str
    members: list[Member] = field(default_factory=list)
    binaries: list[str] = field(default_factory=list)
    framework_srcs: list[int] = field(default_factory=list)
    system_srcs: list[int] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.instance}_pid_{self.pid}"


def is_process_folder_name(name: str) -> bool:
    """Whether a folder name is a capture's process folder (`<instance>_pid_<pid>`)."""
    return _PROCESS_DIR.match(name) is not None


def find_process_folders(members: list[Member]) -> tuple[list[ProcessFolder], list[Member]]:
    """Split members into capture process folders and loose files. Framework traces sort first in
    each folder, so that a system export's copy of the same framework events can be told apart."""
    folders: dict[str, ProcessFolder] = {}
    loose: list[Member] = []
    for member in members:
        parts = PurePosixPath(member.name).parts
        hit = next(((i, m) for i, p in enumerate(parts[:-1]) if (m := _PROCESS_DIR.match(p))), None)
        if hit is None:
            loose.append(member)
            continue
        i, match = hit
        key = "/".join(parts[: i + 1])
        folder = folders.setdefault(key, ProcessFolder(key, match.group("instance"), match.group("pid")))
        folder.members.append(member)
    for folder in folders.values():
        folder.members.sort(key=lambda m: (not _is_framework_name(m.name), m.name))
    return list(folders.values()), loose


def _is_framework_name(name: str) -> bool:
    base = PurePosixPath(name).name
    for suffix in (".gz",):
        base = base.removesuffix(suffix)
    return base == "trace.json" or bool(_RANK_FILE.match(base)) or base.endswith(".pt.trace.json")


def begin_member(builder: TraceBuilder, folder: ProcessFolder, fmt: Format) -> None:
    """Tell the Neuron parsers which process folder the next file belongs to."""
    state = state_of(builder)
    state.scope = folder.key
    state.default_pid = folder.pid
    state.skip_framework = fmt in SYSTEM_FORMATS and bool(folder.framework_srcs)


def end_member(builder: TraceBuilder, folder: ProcessFolder, member: Member, fmt: Format, srcs: range) -> None:
    state = state_of(builder)
    state.scope, state.default_pid, state.skip_framework = "", "", False
    target = folder.framework_srcs if fmt in FRAMEWORK_FORMATS else folder.system_srcs
    target.extend(srcs)
    for src in srcs:
        state.scope_of_src[src] = folder.key
    folder.files.append({"name": member.name, "format": fmt.value})


def join_process_folder(builder: TraceBuilder, folder: ProcessFolder, metas: dict[int, dict[str, Any]]) -> None:
    """After its files are parsed: one instance/process in the track tree, and warnings for what is
    missing (binaries only, no system profile, no framework trace, process ids that disagree)."""
    ranks = {r for src in folder.framework_srcs if (r := _rank(metas.get(src, {}))) is not None}
    for src in folder.framework_srcs + folder.system_srcs:
        builder.instances[src] = folder.instance
    if folder.binaries:
        names = ", ".join(PurePosixPath(n).name for n in folder.binaries)
        builder.warn("neuron_binary", f"{folder.label}: {len(folder.binaries)} Neuron binary file(s) kept as "
                     f"artifacts but not read ({names}); {CONVERT_HINT}", len(folder.binaries), folder.key)
    if folder.framework_srcs and not folder.system_srcs:
        builder.warn("neuron_no_system_profile", f"{folder.label}: a framework trace but no readable Neuron "
                     f"system profile, so the runtime and hardware lanes and device time are empty; {CONVERT_HINT}",
                     1, folder.key)
    if folder.system_srcs and not folder.framework_srcs:
        builder.warn("neuron_no_framework_trace", f"{folder.label}: Neuron system events without a framework "
                     "trace (trace.json): ops cannot be shown for this process", 1, folder.key)
    _name_tracks(builder, folder, f" rank {min(ranks)}" if len(ranks) == 1 else "")


def _rank(meta: dict[str, Any]) -> int | None:
    dist = meta.get("distributed_info")
    rank = dist.get("rank") if isinstance(dist, dict) else None
    return rank if isinstance(rank, int) else None


def _name_tracks(builder: TraceBuilder, folder: ProcessFolder, rank: str) -> None:
    """Name the process (`PID <pid> rank <r>`) and the framework trace's threads like Neuron Explorer
    (`framework/<TID>`, `framework/Stream`); check that the process ids of the folder and its files agree."""
    raw = builder.raw_slices()
    if len(raw.thread) == 0:
        return
    framework = raw.lane == LANE_ORDER[Lane.FRAMEWORK]
    stream_threads = set(np.unique(raw.thread[np.asarray(raw.cat, dtype=object) == "privateuse1_driver"]).tolist())
    framework_threads = set(np.unique(raw.thread[framework]).tolist())
    timed_threads = np.unique(raw.thread[raw.lane != LANE_ORDER[Lane.OTHER]]).tolist()
    framework_pids: set[str] = set()
    system_pids: set[str] = set()
    for t in timed_threads:
        src, pid, tid = builder.thread_key(int(t))
        if src in folder.framework_srcs:
            framework_pids.add(pid)
            if t in framework_threads:
                builder.set_thread_name(src, pid, tid, "framework/Stream" if t in stream_threads else f"framework/{tid}")
        elif src in folder.system_srcs:
            system_pids.add(pid)
        else:
            continue
        builder.set_process_name(src, pid, f"PID {pid}{rank}")
    if framework_pids and system_pids and not framework_pids & system_pids:
        builder.warn("pid_mismatch", f"{folder.label}: the framework trace's process ids "
                     f"({', '.join(sorted(framework_pids))}) and the system profile's "
                     f"({', '.join(sorted(system_pids))}) differ; they were joined as one process because they "
                     "share the capture folder", 1, folder.key)
    elif (system_pids or framework_pids) and folder.pid not in system_pids | framework_pids:
        builder.warn("pid_mismatch", f"{folder.label}: the files name process ids "
                     f"{', '.join(sorted(system_pids | framework_pids))}, not the folder's {folder.pid}", 1,
                     folder.key)
