"""Neuron files that are not timelines: the NEFF / NTFF pairs (and `.pb` captures) kept as a run's artifacts with
what they are, the compiler version a NEFF header names, and the exact commands that convert them; and
`neuron-ls --output-format json` (or the older `--json-output`) output, read as the run's device identity.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.magic import neff_version

KINDS = {  # what each kind of Neuron binary is, in the words the page shows
    "neff": "NEFF: the compiled model (neuronx-cc output) that a profile's instructions came from",
    "ntff": "NTFF: the device trace neuron-profile / neuron-explorer captured for one execution of a NEFF",
    "pb": "system-profile capture (protobuf: ntrace.pb, trace_info.pb, cpu_util.pb, host_mem.pb)",
}
LS_INSTANCE_KEYS = ("instance_type", "instance-type", "instanceType")
LS_ID_KEYS = ("instance_id", "instance-id", "instanceId")
_LS_CORES = re.compile(rb'"nc_count"\s*:')  # as a key, not a value
_LS_DEVICE = re.compile(rb'"neuron_device"\s*:')
_LS_INSTANCE = re.compile(rb'"(instance_type|instance-type|instanceType)"\s*:')
LS_CORE_KEYS = ("nc_count", "neuroncore_count", "neuron_core_count", "core_count", "nc-count")


def neuron_binary_kind(name: str, head: bytes) -> str:
    """`neff` (by its header), `ntff` / `pb` (no published header: by name), else ""."""
    if neff_version(head) is not None:
        return "neff"
    suffix = PurePosixPath(name).suffix.lower()
    return {".ntff": "ntff", ".pb": "pb", ".neff": "neff"}.get(suffix, "")


def describe_neuron_binaries(files: Iterable[tuple[str, int, bytes]]) -> list[dict[str, Any]]:
    """One entry per Neuron binary of (name, size, first bytes): its kind, what it is, the version its header
    names (`None`: the format has no published header to say it), and, for each NEFF, the convert commands
    with the NTFF files of its folder."""
    out: list[dict[str, Any]] = []
    for name, size, head in files:
        kind = neuron_binary_kind(name, head)
        if not kind:
            continue
        version = neff_version(head) if kind == "neff" else None
        out.append({"name": name, "kind": kind, "what": KINDS[kind], "size": size,
                    "version": f"neuronx-cc {version}" if version else None})
    for entry in out:
        if entry["kind"] == "neff":
            folder = PurePosixPath(entry["name"]).parent
            traces = [e["name"] for e in out if e["kind"] == "ntff" and PurePosixPath(e["name"]).parent == folder]
            entry["commands"] = convert_commands(entry["name"], traces)
    return out


def convert_commands(neff: str, ntffs: list[str]) -> list[dict[str, str]]:
    """The commands that turn a NEFF and its NTFF into something readable here, run in the NEFF's folder:
    Neuron Explorer's Parquet export (current SDKs) and the older neuron-profile's summary-text and JSON."""
    n = shlex.quote(PurePosixPath(neff).name)
    stem = PurePosixPath(neff).stem
    traces = [PurePosixPath(t).name for t in ntffs] or ["PROFILE.ntff"]
    out: list[dict[str, str]] = []
    for trace in traces:
        tag = stem if len(traces) == 1 else f"{stem}_{PurePosixPath(trace).stem}"
        s = shlex.quote(trace)
        out += [
            {"tool": "neuron-explorer", "what": "Parquet export (current SDKs, the full device profile)",
             "command": f"neuron-explorer view -n {n} -s {s} --output-format parquet "
                        f"--output-file {shlex.quote(tag + '_parquet')}"},
            {"tool": "neuron-profile", "what": "Summary metrics only (older SDKs)",
             "command": f"neuron-profile view -n {n} -s {s} --output-format summary-text > "
                        f"{shlex.quote(tag + '_summary.txt')}"},
            {"tool": "neuron-profile", "what": "JSON device profile (older SDKs; JSON output ends after 2.33)",
             "command": f"neuron-profile view -n {n} -s {s} --output-format json --output-file "
                        f"{shlex.quote(tag + '.json')}"},
        ]
    return out


def looks_like_neuron_ls(head: bytes) -> bool:
    """`neuron-ls` JSON: a list whose first device object (first 2 KiB) has `nc_count` and `neuron_device`, or an
    object naming the instance with such devices; never a trace (`traceEvents` and the like rule it out)."""
    text = head.lstrip()
    start = text[:2048]
    if text.startswith(b"["):
        return bool(_LS_CORES.search(start)) and bool(_LS_DEVICE.search(start))
    if not text.startswith(b"{") or any(k in head for k in (b'"traceEvents"', b'"trace_event"', b'"events"')):
        return False
    return bool(_LS_CORES.search(head)) and bool(_LS_INSTANCE.search(head))


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((row[k] for k in keys if row.get(k) not in (None, "")), None)


def _devices(doc: Any) -> list[dict[str, Any]]:
    """The device objects: the document itself (the older `--json-output` list) or the first list of objects
    with a core count under the top-level object (`--output-format json`, which adds instance fields)."""
    if isinstance(doc, list):
        return [d for d in doc if isinstance(d, dict)]
    if isinstance(doc, dict):
        for value in doc.values():
            if isinstance(value, list) and value and all(isinstance(d, dict) for d in value) \
                    and any(_first(d, LS_CORE_KEYS) is not None for d in value):
                return value
    return []


def read_neuron_ls(data: bytes, filename: str) -> dict[str, Any]:
    """The instance's Neuron identity: instance type and id (when the output names them), devices and
    NeuronCores (the sum of each device's `nc_count`)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise BadTrace(filename, f"neuron-ls output that is not JSON ({exc})") from None
    devices = _devices(doc)
    if not devices:
        raise BadTrace(filename, "neuron-ls JSON without device entries (nc_count)")
    cores = [_first(d, LS_CORE_KEYS) for d in devices]
    top = doc if isinstance(doc, dict) else {}
    kind = _first(top, LS_INSTANCE_KEYS) or _first(devices[0], LS_INSTANCE_KEYS)
    return {"instance_type": str(kind) if kind is not None else None,
            "instance_id": str(v) if (v := _first(top, LS_ID_KEYS)) is not None else None,
            "neuron_devices": len(devices),
            "neuroncores": sum(c for c in cores if isinstance(c, int) and not isinstance(c, bool))}


def parse_neuron_ls(data: bytes, filename: str, builder: TraceBuilder, instance: str = "") -> dict[str, Any]:
    """No events: the identity goes to the file's metadata, where the run's device models are read from."""
    return {"format": "neuron_ls", "neuron_ls": read_neuron_ls(data, filename)}
