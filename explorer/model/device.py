"""Neuron device profiles of a run: the `device_profiles` run table and the in-memory bundle an ingest
produces (one per captured NEFF execution). The profile's own tables keep the export's table and field
names (explorer/model/neuron_schema.py), times as int64 ns; nothing is computed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

NO_SLICE = -1  # system_slice_id when no nc_exec_running slice of the run matches the profile

DEVICE_PROFILES = pa.schema(
    [
        ("profile_id", pa.string()),  # stable within the run, safe as a folder name: device/<profile_id>/
        ("name", pa.string()),  # DeviceProfileList.device_profile_name, else the export folder's name
        ("instance_id", pa.string()),
        ("process_id", pa.int64()),  # -1 when unknown (as the ids below)
        ("nc_id", pa.int64()),
        ("model_id", pa.int64()),
        ("session_id", pa.int64()),
        ("start_ns", pa.int64()),  # absolute ns, the clock of the system timeline's slices
        ("end_ns", pa.int64()),
        ("system_slice_id", pa.int64()),  # slice_id of its nc_exec_running slice, NO_SLICE if none
        ("schema_version", pa.string()),  # Metadata.profile_schema_version, "" when absent
        ("source", pa.string()),  # the export folder it was read from, as named in the upload
        ("tables", pa.list_(pa.string())),  # the tables the export holds for it (others are stored empty)
    ]
)

# How the two big tables are ordered when stored, so that a time window of one track reads few row groups.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "Instruction": ("timeline_track", "start_ts"),
    "DmaPacket": ("queue_name", "start_ts"),
}


@dataclass
class DeviceProfile:
    """One device profile, ready for the store: its identity row and its tables by export table name."""

    profile_id: str
    name: str
    source: str
    tables: dict[str, pa.Table] = field(default_factory=dict)
    instance_id: str = ""
    process_id: int = -1
    nc_id: int = -1
    model_id: int = -1
    session_id: int = -1
    start_ns: int = 0
    end_ns: int = 0
    system_slice_id: int = NO_SLICE
    schema_version: str = ""

    def row(self) -> dict[str, object]:
        return {
            "profile_id": self.profile_id, "name": self.name, "instance_id": self.instance_id,
            "process_id": self.process_id, "nc_id": self.nc_id, "model_id": self.model_id,
            "session_id": self.session_id, "start_ns": self.start_ns, "end_ns": self.end_ns,
            "system_slice_id": self.system_slice_id, "schema_version": self.schema_version,
            "source": self.source, "tables": sorted(self.tables),
        }
