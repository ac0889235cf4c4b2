"""Device profiles in a run folder: `device_profiles.parquet` (one row per profile) and
`device/<profile_id>/<Table>.parquet` with the export's own table and field names and columns. Writing
happens inside RunStore.save()'s work folder (atomic with the run); reading adds the published columns a
table lacks (nulls) and gives an empty table with them for a table the export lacked. No metrics here.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from explorer.errors import DeviceProfileNotFound
from explorer.model.device import DEVICE_PROFILES, DeviceProfile
from explorer.model.neuron_schema import arrow_schema, table_names, with_published_columns
from explorer.store.parquet import parquet_options

DEVICE_DIR = "device"
PROFILES_FILE = "device_profiles.parquet"


def save_device_profiles(work: Path, profiles: list[DeviceProfile]) -> None:
    """The profiles table and every stored table of every profile, under `work`; nothing for a run
    without device profiles (load_device_profiles() reads the missing file as empty)."""
    if not profiles:
        return
    rows = pa.Table.from_pylist([p.row() for p in profiles], schema=DEVICE_PROFILES)
    pq.write_table(rows, work / PROFILES_FILE)
    for p in profiles:
        folder = work / DEVICE_DIR / p.profile_id
        folder.mkdir(parents=True)
        for name, table in p.tables.items():
            pq.write_table(table, folder / f"{name}.parquet", **parquet_options(table.schema))


def load_device_profiles(run_dir: Path) -> pa.Table:
    """A run's device profiles; empty for a run ingested before device profiles were stored."""
    path = run_dir / PROFILES_FILE
    return pq.read_table(path) if path.exists() else DEVICE_PROFILES.empty_table()


def device_table_path(run_dir: Path, profile_id: str, table: str) -> Path:
    """Where a profile's table lives; raises DeviceProfileNotFound for an unknown profile or table name."""
    ids = load_device_profiles(run_dir).column("profile_id").to_pylist()
    if profile_id not in ids:
        raise DeviceProfileNotFound(f"run {run_dir.name} has no device profile {profile_id!r}",
                                    {"profile_id": profile_id})
    path = run_dir / DEVICE_DIR / profile_id / f"{table}.parquet"
    if table not in table_names() and not path.exists():
        raise DeviceProfileNotFound(f"no device table {table!r} in the Neuron profile schema", {"table": table})
    return path


def load_device_table(run_dir: Path, profile_id: str, table: str) -> pa.Table:
    """A stored table with every published column (those the export lacked as nulls); empty with the
    published columns when the export lacked the table."""
    path = device_table_path(run_dir, profile_id, table)
    if not path.exists():
        return arrow_schema(table).empty_table()
    return with_published_columns(table, pq.read_table(path))
