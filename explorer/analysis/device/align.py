"""How a Neuron device profile sits on the system profile's time axis: checked against the bounds of the
`nc_exec_running` slice it is linked to, and the shift that puts its times on the host clock (the smallest one
that puts the profile inside that slice). The exports carry no clock-sync table, so the execution slice's
bounds are the only evidence; the result says how far the device clock can be off. Integer ns only.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from explorer.model.device_shapes import AlignmentJson
from explorer.model.device_timeline_shapes import ProfileAlignmentJson

UNLINKED: AlignmentJson = {"method": "none", "within": None, "start_offset_ns": None, "end_offset_ns": None,
                           "uncertainty_ns": None, "shift_ns": 0, "shift_min_ns": None, "shift_max_ns": None}


def compute_alignment(start_ns: int, end_ns: int, exec_start_ns: int | None,
                      exec_end_ns: int | None) -> AlignmentJson:
    """The profile [start_ns, end_ns) against its execution slice [exec_start_ns, exec_end_ns) (None: not
    linked). Inside the slice, the device clock agrees with the system clock to within the slack around the
    profile (`uncertainty_ns` = slice length - profile length); outside it, the clocks disagree by at least how
    far it sticks out (`uncertainty_ns`), and `within` is False. Offsets: profile start - slice start and slice
    end - profile end (negative: outside). The shifts that put the profile inside the slice are
    [`shift_min_ns`, `shift_max_ns`] (= slice start - profile start, slice end - profile end); `shift_ns` is the
    one of them nearest 0 (0 when the profile is inside already), or, for a profile longer than its slice (no
    shift fits), the one that centres it (rounded down)."""
    if exec_start_ns is None or exec_end_ns is None:
        return dict(UNLINKED)  # type: ignore[return-value]
    before, after = start_ns - exec_start_ns, exec_end_ns - end_ns
    within = before >= 0 and after >= 0
    uncertainty = before + after if within else max(-min(before, 0), -min(after, 0))
    lo, hi = -before, after
    shift = min(max(0, lo), hi) if lo <= hi else (lo + hi) // 2
    return {"method": "execution_slice", "within": within, "start_offset_ns": before, "end_offset_ns": after,
            "uncertainty_ns": uncertainty, "shift_ns": shift, "shift_min_ns": lo, "shift_max_ns": hi}


def compute_profile_alignments(profiles: pa.Table, slices: pa.Table) -> dict[str, AlignmentJson]:
    """Each `device_profiles` row (absolute ns) against the run slice it is linked to (`system_slice_id`, the
    position of that slice in `slices`, whose `ts_ns`/`dur_ns` are absolute): profile_id -> its alignment."""
    ts = slices.column("ts_ns").to_numpy() if slices.num_rows else np.zeros(0, np.int64)
    dur = slices.column("dur_ns").to_numpy() if slices.num_rows else np.zeros(0, np.int64)
    out: dict[str, AlignmentJson] = {}
    for p in profiles.select(["profile_id", "start_ns", "end_ns", "system_slice_id"]).to_pylist():
        linked = int(p["system_slice_id"])
        span = (int(ts[linked]), int(ts[linked]) + int(dur[linked])) if 0 <= linked < len(ts) else (None, None)
        out[p["profile_id"]] = compute_alignment(int(p["start_ns"]), int(p["end_ns"]), *span)
    return out


def build_alignment_rows(profiles: pa.Table, alignments: dict[str, AlignmentJson],
                         origin_ns: int) -> list[ProfileAlignmentJson]:
    """Each profile with its alignment and its span where the timeline draws it (shifted, relative ns)."""
    out: list[ProfileAlignmentJson] = []
    for p in profiles.to_pylist():
        align = alignments.get(p["profile_id"], UNLINKED)
        shift = align["shift_ns"] - origin_ns
        out.append({"profile_id": p["profile_id"], "name": p["name"], "nc_id": int(p["nc_id"]),
                    "start_ns": int(p["start_ns"]) + shift, "end_ns": int(p["end_ns"]) + shift,
                    "system_slice_id": int(p["system_slice_id"]), "alignment": align})
    return out
