"""The device export fixture with its host clock moved: the system half (SystemProfileEvents and the CPU, host
memory and HBM counters) `DEVICE_LATE_NS` earlier, so that each device profile sticks out of its nc_exec_running
slice, and matmul's execution slice widened (`WIDEN` ns before and after), so that its placement keeps a slack.
Plus an independent reader of where the device events belong: plain pyarrow rows and int arithmetic."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

EXPORT = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "device_export"
DEVICE_LATE_NS = 4321
WIDEN = {4: (700, 300)}  # SystemProfileEvents id of matmul's nc_exec_running -> (ns earlier start, ns later end)
COUNTER_TABLES = ("CpuUsage", "HostMemUsage", "SystemProfileHbmUsage")


def write_shifted_export(root: Path) -> Path:
    dst = root / "shifted_export"
    shutil.copytree(EXPORT, dst)
    system = dst / "system@latest"
    table = pq.read_table(system / "SystemProfileEvents.parquet")
    rows = table.to_pylist()
    for r in rows:
        before, after = WIDEN.get(r["id"], (0, 0))
        r["start_ts"] -= DEVICE_LATE_NS + before
        r["end_ts"] += after - DEVICE_LATE_NS
        r["duration_ns"] = r["end_ts"] - r["start_ts"]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), system / "SystemProfileEvents.parquet")
    for name in COUNTER_TABLES:
        t = pq.read_table(system / f"{name}.parquet")
        at = t.column_names.index("timestamp")
        pq.write_table(t.set_column(at, "timestamp", pc.subtract(t.column("timestamp"), DEVICE_LATE_NS)),
                       system / f"{name}.parquet")
    return dst


def rows_of(folder: Path, table: str) -> list[dict[str, Any]]:
    """Every row of a device table (its split parts `Table_0`, `Table_1`, ... in order)."""
    parts = sorted(folder.glob(f"{table}.parquet")) + sorted(folder.glob(f"{table}_*.parquet"))
    return [r for p in parts for r in pq.read_table(p).to_pylist()]


def expected_placement(export: Path, profile: str) -> dict[str, int]:
    """The profile's execution slice (nc_exec_running on its NeuronCore overlapping its Metadata span the
    most) and the shift that puts the profile inside it, nearest 0: {exec_start, exec_end, first, last,
    shift, shift_min, shift_max}."""
    meta = rows_of(export / f"{profile}@latest", "Metadata")[0]
    listed = next(r for r in rows_of(export / "system@latest", "DeviceProfileList")
                  if r["device_profile_name"] == profile)
    first, last = int(meta["first_hw_timestamp"]), int(meta["last_hw_timestamp"])
    execs = [e for e in rows_of(export / "system@latest", "SystemProfileEvents")
             if e["name"] == "nc_exec_running" and e["nc_idx"] == listed["nc_id"]]
    best = max(execs, key=lambda e: min(last, e["end_ts"]) - max(first, e["start_ts"]))
    lo, hi = best["start_ts"] - first, best["end_ts"] - last
    assert lo <= hi, "the fixture's profiles fit their execution slices"
    return {"exec_start": best["start_ts"], "exec_end": best["end_ts"], "first": first, "last": last,
            "shift": min(max(0, lo), hi), "shift_min": lo, "shift_max": hi}
