"""Neuron device profiles: the profile list, the Summary of a profile or window, the device page and its
twin, the roofline, CSV export of instructions and DMA packets, and the comparison of two profiles (API
and pages). Query times are relative ns like every timeline endpoint; the builders (explorer.views.device)
turn them absolute. No computation here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse

from api.deps import PageRunDep, RelNs, RunDep, StateDep, parse_csv
from api.state import AppState
from api.templating import render_page
from explorer.model.device_shapes import (
    DeviceChainJson,
    DeviceCompare,
    DeviceProfileList,
    DeviceSideBySide,
    DeviceSummaryJson,
    DeviceView,
    ProfileRef,
    RooflineJson,
)
from explorer.runs.run import Run
from explorer.views.device import (
    build_device_compare_page,
    build_device_page,
    compare_views,
    compute_device_profiles,
    compute_roofline_json,
    compute_summary_json,
    device_view,
    iter_csv,
    parse_profile_ref,
    resolve_profile,
    select_csv_rows,
    view_in_window,
)
from explorer.views.device_chain import build_chain_page, run_chain_json
from explorer.views.device_side import build_side_page, check_side_refs, compute_side_by_side
from explorer.views.links import run_json

router = APIRouter(tags=["device"])


class CsvResponse(StreamingResponse):
    """CSV text, streamed; documented in /openapi.json as text/csv, not JSON."""

    media_type = "text/csv"

pages = APIRouter(include_in_schema=False)


@router.get("/api/runs/{run_id}/device/profiles")
def device_profiles(run: RunDep, state: StateDep) -> DeviceProfileList:
    """The run's device profiles (times relative), each with its links."""
    return compute_device_profiles(state.store, run.record)


@router.get("/api/runs/{run_id}/device/summary")
def device_summary(run: RunDep, state: StateDep, profile: str | None = None, start_ns: RelNs = None,
                   end_ns: RelNs = None, core: int | None = None) -> DeviceSummaryJson:
    """The Summary metrics (named as the export's Summary fields) of [start_ns, end_ns) (relative) on
    `core`, and the recommendations on them; the whole profile without a window (the export's own row)."""
    chosen = resolve_profile(state.store, run.record, profile)
    if start_ns is None and end_ns is None and core is None:
        return device_view(run, chosen)["summary"]
    return compute_summary_json(state.store, run.record, chosen, start_ns, end_ns, core)


@router.get("/api/runs/{run_id}/device/{profile}")
def device(run: RunDep, state: StateDep, profile: str, start_ns: RelNs = None, end_ns: RelNs = None) -> DeviceView:
    """The device page's data: Summary, engines, opcodes, DMA, layers, throttling, errors, roofline,
    hierarchy, tensors and SBUF allocations; a window (relative ns) adds its Summary and roofline point."""
    view = device_view(run, resolve_profile(state.store, run.record, profile))
    return view_in_window(state.store, run.record, view, start_ns, end_ns)


@router.get("/api/runs/{run_id}/device/{profile}/roofline")
def device_roofline(run: RunDep, state: StateDep, profile: str, start_ns: RelNs = None,
                    end_ns: RelNs = None) -> RooflineJson:
    """Roofs and points: the profile, the window (relative ns) when given, each framework op in it."""
    chosen = resolve_profile(state.store, run.record, profile)
    if start_ns is None and end_ns is None:
        return device_view(run, chosen)["roofline"]
    return compute_roofline_json(state.store, run.record, chosen, start_ns, end_ns)


def _csv(run: Run, state: AppState, profile: str, kind: Literal["instructions", "dma"],
         start_ns: RelNs, end_ns: RelNs, tracks: str | None) -> CsvResponse:
    chosen = resolve_profile(state.store, run.record, profile)
    rows = select_csv_rows(state.store, run.record, chosen, kind, start_ns, end_ns, parse_csv(tracks, "tracks"))
    headers = {"Content-Disposition": f'attachment; filename="{run.id}-{chosen["profile_id"]}-{kind}.csv"'}
    return CsvResponse(iter_csv(rows), media_type="text/csv; charset=utf-8", headers=headers)


@router.get("/api/runs/{run_id}/device/{profile}/instructions.csv", response_class=CsvResponse)
def instructions_csv(run: RunDep, state: StateDep, profile: str, start_ns: RelNs = None,
                     end_ns: RelNs = None, tracks: str | None = None) -> CsvResponse:
    """Instructions overlapping the range (relative ns), on `tracks` (timeline_track, comma-separated)."""
    return _csv(run, state, profile, "instructions", start_ns, end_ns, tracks)


@router.get("/api/runs/{run_id}/device/{profile}/dma.csv", response_class=CsvResponse)
def dma_csv(run: RunDep, state: StateDep, profile: str, start_ns: RelNs = None, end_ns: RelNs = None,
            tracks: str | None = None) -> CsvResponse:
    """DMA packets overlapping the range (relative ns), on `tracks` (queue names, comma-separated)."""
    return _csv(run, state, profile, "dma", start_ns, end_ns, tracks)


def _compare(state: AppState, a: str, b: str) -> DeviceCompare:
    views, refs = [], []
    for text in (a, b):
        run_id, profile_id = parse_profile_ref(text)
        run = state.runs.get(run_id)
        rec = run.record
        chosen = resolve_profile(state.store, rec, profile_id)
        views.append(device_view(run, chosen))
        refs.append(ProfileRef(run_id=rec.id, profile_id=chosen["profile_id"], name=chosen["name"]))
    return compare_views(views[0], views[1], refs[0], refs[1])


@router.get("/api/device/compare")
def device_compare(state: StateDep, a: str, b: str) -> DeviceCompare:
    """Two device profiles (`run:profile`): Summary with deltas (b - a), opcodes with deltas, engines."""
    return _compare(state, a, b)


@pages.get("/runs/{run_id}/device/{profile}", response_class=HTMLResponse)
def device_page(request: Request, run: PageRunDep, state: StateDep, profile: str, start_ns: RelNs = None,
                end_ns: RelNs = None) -> HTMLResponse:
    view = view_in_window(state.store, run.record, device_view(run, resolve_profile(state.store, run.record, profile)),
                          start_ns, end_ns)
    page = build_device_page(run.record, view, start_ns, end_ns)
    return render_page(request, state, "device.html", page, active="device", plotly=True)


@pages.get("/device/compare", response_class=HTMLResponse)
def device_compare_page(request: Request, state: StateDep, a: str, b: str) -> HTMLResponse:
    page = build_device_compare_page(_compare(state, a, b), a, b)
    return render_page(request, state, "device_compare.html", page)


def _side_refs(state: AppState, p: list[str] | None, runs: str | None) -> list[str]:
    """`p=run:profile` as given, then every device profile of each run in `runs=a,b` (start order)."""
    refs = list(p or [])
    for run_id in parse_csv(runs, "runs") or []:
        rec = state.store.require_ready(run_id)
        refs += [f"{rec.id}:{prof['profile_id']}" for prof in compute_device_profiles(state.store, rec)["profiles"]]
    return refs


def _side(state: AppState, refs: list[str]) -> DeviceSideBySide:
    check_side_refs(refs)
    views, chosen_refs = [], []
    for text in refs:
        run_id, profile_id = parse_profile_ref(text)
        run = state.runs.get(run_id)
        rec = run.record
        chosen = resolve_profile(state.store, rec, profile_id)
        views.append(device_view(run, chosen))
        chosen_refs.append(ProfileRef(run_id=rec.id, profile_id=chosen["profile_id"], name=chosen["name"]))
    return compute_side_by_side(views, chosen_refs)


@router.get("/api/device/side-by-side")
def device_side_by_side(state: StateDep, p: Annotated[list[str] | None, Query()] = None,
                        runs: str | None = None) -> DeviceSideBySide:
    """Two to eight device profiles (`p=run:profile`, repeated, and/or every profile of `runs=a,b`): engines and
    Summary fields, deltas from the first."""
    return _side(state, _side_refs(state, p, runs))


@pages.get("/device/side-by-side", response_class=HTMLResponse)
def device_side_page(request: Request, state: StateDep, p: Annotated[list[str] | None, Query()] = None,
                     runs: str | None = None) -> HTMLResponse:
    page = build_side_page(_side(state, _side_refs(state, p, runs)), p or [], runs)
    return render_page(request, state, "device_side.html", page)


@router.get("/api/runs/{run_id}/device/{profile}/chain")
def device_chain(run: RunDep, state: StateDep, profile: str, node: str, mode: str = "trace") -> DeviceChainJson:
    """What an instruction or DMA transfer (`node=Instruction:<id>` / `DmaPacket:<id>`) waited on and what waited
    on it; `mode=step` walks one step upstream, `trace` to the root cause; waits per engine / queue."""
    return run_chain_json(state.store, run.record, profile, node, mode)


@pages.get("/runs/{run_id}/device/{profile}/chain", response_class=HTMLResponse)
def device_chain_page(request: Request, run: PageRunDep, state: StateDep, profile: str, node: str,
                      mode: str = "trace") -> HTMLResponse:
    chain = run_chain_json(state.store, run.record, profile, node, mode)
    page = build_chain_page(run_json(run.record), resolve_profile(state.store, run.record, profile), chain, node, mode)
    return render_page(request, state, "device_chain.html", page, active="device")
