"""How a Neuron device profile sits on the system profile's time axis: its timestamps are drawn as they are (one
axis for host and device), checked against the bounds of the `nc_exec_running` slice it is linked to. The exports
this explorer reads carry no clock-sync table, so the execution slice's bounds are the only evidence; the result
says how far the device clock can be off. Integer ns in, integer ns out; the wording is the page's.
"""

from __future__ import annotations

from explorer.model.device_shapes import AlignmentJson


def compute_alignment(start_ns: int, end_ns: int, exec_start_ns: int | None,
                      exec_end_ns: int | None) -> AlignmentJson:
    """The profile [start_ns, end_ns) against its execution slice [exec_start_ns, exec_end_ns) (None: not
    linked). Inside the slice, the device clock agrees with the system clock to within the slack around the
    profile (`uncertainty_ns` = slice length - profile length); outside it, the clocks disagree by at least how
    far it sticks out (`uncertainty_ns`), and `within` is False. Offsets: profile start - slice start and slice
    end - profile end (negative: outside)."""
    if exec_start_ns is None or exec_end_ns is None:
        return {"method": "none", "within": None, "start_offset_ns": None, "end_offset_ns": None,
                "uncertainty_ns": None}
    before, after = start_ns - exec_start_ns, exec_end_ns - end_ns
    within = before >= 0 and after >= 0
    uncertainty = before + after if within else max(-min(before, 0), -min(after, 0))
    return {"method": "execution_slice", "within": within, "start_offset_ns": before, "end_offset_ns": after,
            "uncertainty_ns": uncertainty}
