"""Neuron device models of a run beside the GPU ones (runs.run_devices): the instance a `neuron-ls` file names
(with its devices and NeuronCores), else the instance types summary-text profiles name. Read from the ingested
trace's metadata and device profiles; nothing is computed from events here.
"""

from __future__ import annotations

from typing import Any

from explorer.model.tables import IngestedTrace

MAX_DEVICE_NAME = 200  # a device name is trace text: bounded before it is stored in the catalog


def neuron_ls_devices(files: list[Any]) -> list[dict[str, Any]]:
    """Each neuron-ls file of the run: its instance type (else "Neuron instance") with its devices and cores."""
    out: list[dict[str, Any]] = []
    for f in files:
        ls = f.get("neuron_ls") if isinstance(f, dict) else None
        if isinstance(ls, dict):
            name = str(ls.get("instance_type") or "Neuron instance")[:MAX_DEVICE_NAME]
            out.append({"name": name, "count": 1, "source": "neuron-ls", "neuron_devices": ls.get("neuron_devices"),
                        "neuroncores": ls.get("neuroncores"), "instance_id": ls.get("instance_id")})
    return out


def summary_text_devices(trace: IngestedTrace, known: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The instance types summary-text profiles name (their Summary's `instance_type` key), when no other
    source named one: count is the number of profiles that name it."""
    if known:
        return []
    counts: dict[str, int] = {}
    for p in trace.device_profiles:
        rows = p.tables.get("Summary")
        if rows is not None and rows.num_rows and "instance_type" in rows.column_names:
            kind = str(rows.column("instance_type")[0].as_py() or "").strip()[:MAX_DEVICE_NAME]
            if kind:
                counts[kind] = counts.get(kind, 0) + 1
    return [{"name": k, "count": n, "source": "neuron summary-text"} for k, n in counts.items()]
