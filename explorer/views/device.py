"""Device-profile data (Neuron), computed once and rendered twice: the profile list, the Summary of a
profile or window, the roofline, the device page's sections and the comparison of two profiles, each the
object its JSON route returns and its page holds. Times in and out are relative ns (from the run's
origin) and become the profile's absolute clock only at this edge; nothing here formats a number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlencode

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.device.advice import compute_recommendations
from explorer.analysis.device.align import compute_alignment
from explorer.analysis.device.breakdown import (
    compute_dma_breakdown,
    compute_opcode_summary,
    compute_throttle_summary,
)
from explorer.analysis.device.roofline import compute_roofline
from explorer.analysis.device.rows import ENGINES, Tables, Window, overlap_mask, times
from explorer.analysis.device.sections import compute_hierarchy, compute_sbuf_rects, compute_tensor_table
from explorer.analysis.device.summary import compute_device_summary
from explorer.errors import BadRequest, DeviceProfileNotFound
from explorer.model.device_shapes import (
    AlignmentJson,
    DeviceCompare,
    DeviceProfileJson,
    DeviceProfileList,
    DeviceSummaryJson,
    DeviceView,
    MetricDelta,
    OpcodeDelta,
    ProfileRef,
    RecommendationJson,
    RooflineJson,
    SbufRect,
    SummaryField,
)
from explorer.model.neuron_schema import fields_of
from explorer.model.shapes import RunJson
from explorer.runs.run import Run
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore
from explorer.views.charts import make_roofline_figure, make_sbuf_figure
from explorer.views.links import run_json


def profile_links(run_id: str, profile_id: str) -> dict[str, str]:
    api = f"/api/runs/{run_id}/device/{profile_id}"
    return {"page": f"/runs/{run_id}/device/{profile_id}", "self": api,
            "summary": f"/api/runs/{run_id}/device/summary?profile={profile_id}", "roofline": f"{api}/roofline",
            "instructions_csv": f"{api}/instructions.csv", "dma_csv": f"{api}/dma.csv"}


def _profile_json(row: dict[str, Any], rec: RunRecord) -> DeviceProfileJson:
    origin = rec.summary.start_ns
    out = {**row, "start_ns": row["start_ns"] - origin, "end_ns": row["end_ns"] - origin,
           "links": profile_links(rec.id, row["profile_id"])}
    return cast(DeviceProfileJson, out)


def compute_device_profiles(store: RunStore, rec: RunRecord) -> DeviceProfileList:
    """GET /api/runs/{id}/device/profiles: every device profile of the run, in start order."""
    rows = sorted(store.device_profiles(rec.id).to_pylist(), key=lambda r: (r["start_ns"], r["profile_id"]))
    return {"origin_ns": rec.summary.start_ns, "profiles": [_profile_json(r, rec) for r in rows]}


def resolve_profile(store: RunStore, rec: RunRecord, profile: str | None) -> DeviceProfileJson:
    """The profile asked for; without a name, the run's only one. 404 device_profile_not_found otherwise."""
    profiles = compute_device_profiles(store, rec)["profiles"]
    if profile is None and len(profiles) == 1:
        return profiles[0]
    for p in profiles:
        if p["profile_id"] == profile:
            return p
    names = ", ".join(p["profile_id"] for p in profiles) or "none"
    why = "name one with profile=" if profile is None else f"no device profile {profile!r}"
    raise DeviceProfileNotFound(f"run {rec.id}: {why} (its device profiles: {names})",
                                {"profile_id": profile, "profiles": [p["profile_id"] for p in profiles]})


def load_profile_tables(store: RunStore, run_id: str, profile: DeviceProfileJson) -> Tables:
    """The tables the export holds for the profile, by the export's table names."""
    return {name: store.device_table(run_id, profile["profile_id"], name) for name in profile["tables"]}


def absolute(rec: RunRecord, relative_ns: int | None) -> int | None:
    return None if relative_ns is None else rec.summary.start_ns + relative_ns


def _recommendation(r: RecommendationJson, origin: int) -> RecommendationJson:
    """The finding with `at_ns` relative to the run's origin."""
    return {**r, "at_ns": None if r["at_ns"] is None else r["at_ns"] - origin}


def compute_summary_json(store: RunStore, rec: RunRecord, profile: DeviceProfileJson, start_ns: int | None = None,
                         end_ns: int | None = None, core: int | None = None) -> DeviceSummaryJson:
    """GET /api/runs/{id}/device/summary: the Summary of the window (relative ns; the whole profile without
    one, then the export's own Summary row) with the recommendation rules evaluated on it."""
    tables = load_profile_tables(store, rec.id, profile)
    t0, t1 = absolute(rec, start_ns), absolute(rec, end_ns)
    summary = compute_device_summary(tables, t0, t1, core)
    origin = rec.summary.start_ns
    return {"profile": profile["profile_id"], "start_ns": summary.start_ns - origin,
            "end_ns": summary.end_ns - origin, "core": core, "metrics": summary.metrics,
            "from_export": sorted(summary.from_export),
            "recommendations": [_recommendation(r, origin) for r in compute_recommendations(tables, t0, t1, core)]}


def compute_roofline_json(store: RunStore, rec: RunRecord, profile: DeviceProfileJson, start_ns: int | None = None,
                          end_ns: int | None = None) -> RooflineJson:
    """GET /api/runs/{id}/device/{profile}/roofline: the profile's point, the window's when one is given
    (relative ns) and each framework op's in it."""
    tables = load_profile_tables(store, rec.id, profile)
    return compute_roofline(tables, absolute(rec, start_ns), absolute(rec, end_ns),
                            profile_id=profile["profile_id"])


def _sbuf(tables: Tables, origin: int) -> list[SbufRect]:
    """The SBUF rectangles with times relative to the run's origin."""
    return [{**a, "start_ns": a["start_ns"] - origin, "end_ns": a["end_ns"] - origin}
            for a in compute_sbuf_rects(tables)]


def compute_device_view(store: RunStore, rec: RunRecord, profile: DeviceProfileJson) -> DeviceView:
    """GET /api/runs/{id}/device/{profile}: every section of the device page, for the whole profile."""
    tables = load_profile_tables(store, rec.id, profile)
    summary = compute_summary_json(store, rec, profile)
    metrics = summary["metrics"]
    roofline = compute_roofline(tables, profile_id=profile["profile_id"])
    errors = tables.get("Error")
    return {
        "profile": profile, "summary": summary, "window": None,
        "engines": [{"engine": e, "instruction_count": _count(metrics.get(f"{e}_engine_instruction_count")),
                     "active_time_percent": metrics.get(f"{e}_engine_active_time_percent")} for e in ENGINES],
        "opcodes": compute_opcode_summary(tables),
        "dma": compute_dma_breakdown(tables),
        "layers": [p for p in roofline["points"] if p["kind"] == "layer"],
        "throttle": compute_throttle_summary(tables),
        "errors": errors.to_pylist() if errors is not None else [],
        "roofline": roofline, "hierarchy": compute_hierarchy(tables),
        "tensors": compute_tensor_table(tables),
        "sbuf": _sbuf(tables, rec.summary.start_ns),
        "summary_fields": summary_fields(tables),
        "alignment": profile_alignment(store, rec, profile),
    }


def device_view(run: Run, profile: DeviceProfileJson) -> DeviceView:
    """A device profile's whole-profile page data, computed once per profile (the device page, its twin, the
    summary without a window and the compare page share it)."""
    return run.cached_device(f"device/{profile['profile_id']}", lambda: compute_device_view(run.store, run.record,
                                                                                             profile))


def profile_alignment(store: RunStore, rec: RunRecord, profile: DeviceProfileJson) -> AlignmentJson:
    """The profile against its nc_exec_running slice (absolute ns on both sides)."""
    origin, linked = rec.summary.start_ns, profile["system_slice_id"]
    rows = store.slice_rows(rec.id, [linked]) if linked >= 0 else []
    exec_start = int(rows[0]["ts_ns"]) if rows else None
    exec_end = None if exec_start is None else exec_start + int(rows[0]["dur_ns"])
    return compute_alignment(profile["start_ns"] + origin, profile["end_ns"] + origin, exec_start, exec_end)


def _count(value: int | float | None) -> int | None:
    return None if value is None else int(value)


def summary_fields(tables: Tables) -> list[SummaryField]:
    """Every non-null field of the profile's stored `Summary` row, in its stored order, each marked published
    or not (a summary-text key the schema does not know)."""
    published = {f.name for f in fields_of("Summary")}
    rows = tables.get("Summary")
    row = rows.slice(0, 1).to_pylist()[0] if rows is not None and rows.num_rows else {}
    return [{"name": k, "value": v, "published": k in published} for k, v in row.items()
            if v is not None or k not in published]


def view_in_window(store: RunStore, rec: RunRecord, view: DeviceView, start_ns: int | None,
                   end_ns: int | None) -> DeviceView:
    """The whole-profile view with a selected window (relative ns): its Summary and recommendations, and
    the roofline with the window's point (framework ops in the window). Unchanged without a window."""
    if start_ns is None and end_ns is None:
        return view
    profile = view["profile"]
    return {**view, "window": compute_summary_json(store, rec, profile, start_ns, end_ns),
            "roofline": compute_roofline_json(store, rec, profile, start_ns, end_ns)}


# ---- CSV export ---------------------------------------------------------------------------------

CSV_TABLES = {"instructions": ("Instruction", "timeline_track"), "dma": ("DmaPacket", "queue_name")}
CSV_INJECTION = ("=", "+", "-", "@")
CSV_BATCH_ROWS = 8192


def csv_cell(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula (= + - @) gets a leading quote."""
    if isinstance(value, str) and value.startswith(CSV_INJECTION):
        return "'" + value
    return value


def select_csv_rows(store: RunStore, rec: RunRecord, profile: DeviceProfileJson, kind: str,
                    start_ns: int | None, end_ns: int | None, tracks: list[str] | None) -> pa.Table:
    """The rows of the range (relative ns; overlapping it) on the given tracks (`timeline_track` of an
    instruction, `queue_name` of a DMA packet), with `timeline_track` first, then the export's fields
    (times as exported: the profile's absolute ns)."""
    name, track_column = CSV_TABLES[kind]
    rows = store.device_table(rec.id, profile["profile_id"], name)
    t0, t1 = absolute(rec, start_ns), absolute(rec, end_ns)
    lowest, highest = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
    window = Window(lowest if t0 is None else t0, highest if t1 is None else t1)
    mask = overlap_mask(*times(rows), window) if rows.num_rows else np.zeros(0, bool)
    if tracks:
        mask &= pc.is_in(rows[track_column], pa.array(tracks)).to_numpy(zero_copy_only=False)
    picked = rows.filter(pa.array(mask, pa.bool_()))
    if track_column != "timeline_track":
        picked = picked.add_column(0, "timeline_track", picked[track_column])
    else:
        picked = picked.select(["timeline_track", *[c for c in picked.column_names if c != "timeline_track"]])
    return picked


def iter_csv(rows: pa.Table) -> Iterator[str]:
    """The table as CSV text, a batch at a time (header first); text cells escaped by csv_cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(rows.column_names)
    for batch in rows.to_batches(CSV_BATCH_ROWS):
        for row in zip(*(c.to_pylist() for c in batch.columns), strict=True):
            writer.writerow(["" if v is None else csv_cell(v) for v in row])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue()
    elif not rows.num_rows:
        yield ""


# ---- compare ------------------------------------------------------------------------------------

def parse_profile_ref(text: str) -> tuple[str, str]:
    """`run:profile` -> (run_id, profile_id)."""
    run_id, sep, profile_id = text.partition(":")
    if not sep or not run_id or not profile_id:
        raise BadRequest(f"a device profile is named run:profile, not {text!r}")
    return run_id, profile_id


def _delta(name: str, a: int | float | None, b: int | float | None) -> MetricDelta:
    return {"name": name, "a": a, "b": b, "delta": None if a is None or b is None else b - a}


def compare_views(a: DeviceView, b: DeviceView, ref_a: ProfileRef, ref_b: ProfileRef) -> DeviceCompare:
    """Summary side by side with deltas (b - a), opcode rows matched by (engine, opcode), engine bars."""
    ma, mb = a["summary"]["metrics"], b["summary"]["metrics"]
    names = [*ma, *(k for k in mb if k not in ma)]
    ops_a = {(r["engine"], r["opcode"]): r for r in a["opcodes"]}
    ops_b = {(r["engine"], r["opcode"]): r for r in b["opcodes"]}
    opcodes: list[OpcodeDelta] = []
    for key in [*ops_a, *(k for k in ops_b if k not in ops_a)]:
        ra, rb = ops_a.get(key), ops_b.get(key)
        ta, tb = ra["active_time_ns"] if ra else 0, rb["active_time_ns"] if rb else 0
        opcodes.append({"engine": key[0], "opcode": key[1], "a_count": ra["instruction_count"] if ra else 0,
                        "b_count": rb["instruction_count"] if rb else 0, "a_active_time_ns": ta,
                        "b_active_time_ns": tb, "delta_active_time_ns": tb - ta})
    opcodes.sort(key=lambda r: (-abs(r["delta_active_time_ns"]), r["engine"], r["opcode"]))
    engines = [_delta(f"{e}_engine_active_time_percent", ma.get(f"{e}_engine_active_time_percent"),
                      mb.get(f"{e}_engine_active_time_percent")) for e in ENGINES]
    engines.append(_delta("dma_active_time_percent", ma.get("dma_active_time_percent"),
                          mb.get("dma_active_time_percent")))
    return {"a": ref_a, "b": ref_b, "metrics": [_delta(n, ma.get(n), mb.get(n)) for n in names],
            "opcodes": opcodes, "engines": engines}


# ---- pages --------------------------------------------------------------------------------------

@dataclass
class DevicePage:
    """`/runs/{id}/device/{profile}`; twin `/api/runs/{id}/device/{profile}`."""

    run: RunJson
    view: DeviceView
    figures: dict[str, dict[str, Any]]
    twin: str = ""

    @property
    def metrics(self) -> dict[str, int | float]:
        return self.view["summary"]["metrics"]


def window_query(start_ns: int | None, end_ns: int | None) -> str:
    """`?start_ns=&end_ns=` of a device page and its twin ("" without a window)."""
    params = {k: v for k, v in (("start_ns", start_ns), ("end_ns", end_ns)) if v is not None}
    return "?" + urlencode(params) if params else ""


def build_device_page(rec: RunRecord, view: DeviceView, start_ns: int | None = None,
                      end_ns: int | None = None) -> DevicePage:
    """The device page over the view its twin returns (`view_in_window`'s, for the same window)."""
    figures = {"roofline": make_roofline_figure(view["roofline"])}
    if view["sbuf"]:
        figures["sbuf"] = make_sbuf_figure(view["sbuf"])
    return DevicePage(run_json(rec), view, figures, view["profile"]["links"]["self"] + window_query(start_ns, end_ns))


def build_device_pages(store: RunStore, run_id: str) -> list[DevicePage]:
    """One device page per device profile of the run, in start order (the offline report's sections)."""
    rec = store.require_ready(run_id)
    return [build_device_page(rec, compute_device_view(store, rec, p))
            for p in compute_device_profiles(store, rec)["profiles"]]


@dataclass
class DeviceComparePage:
    """`/device/compare?a=run:profile&b=run:profile`; twin `/api/device/compare` with the same query."""

    compare: DeviceCompare
    twin: str = ""


def device_compare_query(a: str, b: str) -> str:
    return urlencode({"a": a, "b": b}, safe=":")


def build_device_compare_page(compare: DeviceCompare, a: str, b: str) -> DeviceComparePage:
    return DeviceComparePage(compare, "/api/device/compare?" + device_compare_query(a, b))


def device_nav(store: RunStore, run: RunJson | None) -> list[dict[str, str]]:
    """The run nav's device tabs: (profile_id, name) of each device profile of a ready run."""
    if run is None or run["status"] != "ready":
        return []
    rows = store.device_profiles(run["id"]).select(["profile_id", "name", "start_ns"]).to_pylist()
    return [{"profile_id": r["profile_id"], "name": r["name"]}
            for r in sorted(rows, key=lambda r: (r["start_ns"], r["profile_id"]))]
