"""Roofline data of a Neuron device profile: achieved FLOP/s against arithmetic intensity for the whole
profile, a window and each framework op (`Instruction.layer`, else `raw_framework_id`), under the compute
roof (`max_ops`) and the HBM bandwidth roof (`hbm_ddr_bandwidth`) with the ridge at
`peak_flops_bandwidth_ratio`. FLOPs are matmul FLOPs (hardware minus transpose) and bytes HBM reads plus
writes, as in `mm_arithmetic_intensity`. Numbers only; the chart is drawn elsewhere.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import numpy as np

from explorer.analysis.device.rows import (
    NS_PER_S,
    Peaks,
    Tables,
    Window,
    active_intervals,
    encode,
    groups,
    ints,
    peaks,
    prorata,
    select,
    table,
    times,
    union_ns,
    window_of,
)
from explorer.analysis.device.summary import DeviceSummary, compute_device_summary
from explorer.model.device_shapes import RooflineJson, RooflinePointJson

Bound = Literal["compute", "memory"]
PointKind = Literal["profile", "window", "layer"]


def make_point(peak: Peaks, kind: PointKind, label: str, flops: int, hbm_bytes: int,
               time_ns: int) -> RooflinePointJson:
    """Place `flops` done in `time_ns` moving `hbm_bytes` under the roofs, exactly until the final floats.
    `intensity` (FLOP/byte) is None when no HBM byte moved (then it sits at the compute roof);
    `attainable_flops_per_s` = min(max_ops, intensity x bandwidth); `bound` is memory below the ridge,
    compute at or above it; `distance_to_roof` = attainable / achieved (1.0 on the roof; None when nothing
    was achieved); `mfu_inst_estimated_percent` = achieved / max_ops, the Summary's metric of that name for
    this point (None for zero time)."""
    intensity = Fraction(flops, hbm_bytes) if hbm_bytes else None
    attainable = peak.max_ops if intensity is None else min(peak.max_ops, intensity * peak.hbm_bytes_per_s)
    achieved = Fraction(flops * NS_PER_S, time_ns) if time_ns else None
    bound: Bound = "compute" if intensity is None or intensity >= peak.ridge else "memory"
    return {"kind": kind, "label": label, "flops": flops, "hbm_bytes": hbm_bytes, "time_ns": time_ns,
            "achieved_flops_per_s": None if achieved is None else float(achieved),
            "intensity": None if intensity is None else float(intensity),
            "attainable_flops_per_s": float(attainable), "bound": bound,
            "distance_to_roof": float(attainable / achieved) if achieved else None,
            "mfu_inst_estimated_percent": None if achieved is None else float(achieved / peak.max_ops)}


def _summary_point(peak: Peaks, kind: PointKind, label: str,
                   metrics: dict[str, int | float]) -> RooflinePointJson:
    flops = int(metrics.get("hardware_flops", 0)) - int(metrics.get("transpose_flops", 0))
    hbm = int(metrics.get("hbm_read_bytes", 0)) + int(metrics.get("hbm_write_bytes", 0))
    time_ns = round(Fraction(metrics["total_time"]) * NS_PER_S)
    return make_point(peak, kind, label, flops, hbm, time_ns)


def compute_roofline(tables: Tables, start_ns: int | None = None, end_ns: int | None = None,
                     core: int | None = None, profile: DeviceSummary | None = None, *,
                     profile_id: str = "") -> RooflineJson:
    """The roofs and points: the profile (its Summary; pass `profile`, the result of
    `compute_device_summary(tables)`, when it is at hand), the window when one is given, and each framework
    op in the window (its device time is the union of its instructions' active intervals). Without the
    `Metadata` peaks, `available` is False, with no roofs and no points. `profile_id` is returned as
    `profile`."""
    whole = compute_device_summary(tables) if profile is None else profile
    peak = peaks(tables)
    roofs_from: Literal["metadata", "summary"] = "metadata"
    if peak is None:
        peak, roofs_from = summary_peaks(whole.metrics), "summary"
    if peak is None:
        return {"profile": profile_id, "available": False, "max_ops": None, "hbm_ddr_bandwidth": None,
                "peak_flops_bandwidth_ratio": None, "points": [], "roofs_from": None}
    points = [_summary_point(peak, "profile", "profile", whole.metrics)]
    if start_ns is not None or end_ns is not None or core is not None:
        points.append(_summary_point(peak, "window", "window",
                                     compute_device_summary(tables, start_ns, end_ns, core).metrics))
    points += _layer_points(peak, tables, window_of(tables, start_ns, end_ns), core)
    return {"profile": profile_id, "available": True, "max_ops": float(peak.max_ops),
            "hbm_ddr_bandwidth": float(peak.hbm_bytes_per_s), "peak_flops_bandwidth_ratio": float(peak.ridge),
            "points": points, "roofs_from": roofs_from}


def summary_peaks(metrics: dict[str, int | float]) -> Peaks | None:
    """The roofs a Summary alone implies, by the published definitions: `mfu_inst_estimated_percent` =
    (hardware - transpose FLOPs) / (max_ops x total_time), a fraction of 1, so max_ops = FLOPs / (total_time x
    mfu), and the HBM roof = max_ops / `peak_flops_bandwidth_ratio`. None unless all of them are known and positive
    (a profile without Metadata, such as a summary-text one)."""
    names = ("hardware_flops", "total_time", "mfu_inst_estimated_percent", "peak_flops_bandwidth_ratio")
    if not all(isinstance(metrics.get(n), int | float) for n in names):
        return None
    flops = Fraction(metrics["hardware_flops"]) - Fraction(metrics.get("transpose_flops", 0))
    seconds, mfu = Fraction(metrics["total_time"]), Fraction(metrics["mfu_inst_estimated_percent"])
    ridge = Fraction(metrics["peak_flops_bandwidth_ratio"])
    if min(flops, seconds, mfu, ridge) <= 0:
        return None
    max_ops = flops / (seconds * mfu)
    return Peaks(max_ops / NS_PER_S, max_ops / ridge)


def _layer_points(peak: Peaks, tables: Tables, window: Window, core: int | None) -> list[RooflinePointJson]:
    """One point per framework op in the window, most device time first."""
    rows = select(table(tables, "Instruction"), window, core)
    if rows is None:
        return []
    layers, labels = encode(rows, "layer", lambda v: v)
    framework, _ = encode(rows, "raw_framework_id", lambda v: v, labels)
    layers = np.where(layers >= 0, layers, framework)
    act_start, act_end = active_intervals(rows)
    start, end = times(rows)
    zero = np.zeros(rows.num_rows, np.int64)
    columns = {name: zero if (v := ints(rows, name)) is None else v
               for name in ("raw_flops", "flops_transpose", "hbm_read_bytes", "hbm_write_bytes")}

    def total(name: str, mine: np.ndarray) -> int:
        return prorata(columns[name][mine], start[mine], end[mine], window)

    out: list[RooflinePointJson] = []
    for code, mine in groups(layers):
        flops = total("raw_flops", mine) - total("flops_transpose", mine)
        hbm = total("hbm_read_bytes", mine) + total("hbm_write_bytes", mine)
        out.append(make_point(peak, "layer", labels[code], flops, hbm,
                              union_ns(act_start[mine], act_end[mine], window)))
    return sorted(out, key=lambda p: (-p["time_ns"], p["label"]))
