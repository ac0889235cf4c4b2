"""The agent tools, one entry each in TOOLS: a thin wrapper over the very handler its HTTP JSON twin runs
(api/routes/*), given the same parameters, so a tool and its twin cannot answer differently. Bounding the answer
(rows, characters) is the registry's (api/mcp/registry.py); nothing here formats or cuts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field
from starlette.responses import Response

from api.deps import TIME_BOUND_NS, ready_run
from api.mcp.bounds import DEFAULT_CHARS, DEFAULT_ROWS, Chars, Rows
from api.routes import (
    advice,
    check,
    collectives,
    compare,
    device,
    kernels,
    memory,
    ops,
    overview,
    ranks,
    runs,
    sql,
    steps,
    timeline,
)
from api.state import AppState
from api.views import run_json
from explorer.runs.refs import REF_HELP, resolve_cli_ref
from explorer.runs.run import Run
from explorer.views.collectives import COLLECTIVES_SORT
from explorer.views.kernels import KernelsQuery
from explorer.views.ops import OpsQuery

RunRef = Annotated[str, Field(min_length=1, max_length=300, description=f"the run: {REF_HELP}, or its exact name")]
RelTime = Annotated[int | None, Field(ge=-TIME_BOUND_NS, le=TIME_BOUND_NS,
                                      description="ns relative to the run's start (its origin)")]
Ranks = Annotated[str | None, Field(max_length=2000, description="comma-separated ranks to keep, e.g. 0,3")]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its function (AppState first, then the tool's own parameters, each ending with `limit` and
    `max_chars`), what narrows its answer, its HTTP twin, and whether it only runs in a local (stdio) server."""

    name: str
    fn: Callable[..., dict[str, Any]]
    narrow: str  # how to ask for less: the parameters that filter this tool's answer
    twin: str  # the HTTP JSON route answering the same question
    local_only: bool = False


def body(value: Any) -> dict[str, Any]:
    """A handler's answer as JSON values: a Response's body parsed, a dict as is (JSON round trip: tuples become
    lists, exactly as the twin's client sees them)."""
    answer: dict[str, Any] = json.loads(bytes(value.body) if isinstance(value, Response) else json.dumps(value))
    return answer


def ready(state: AppState, ref: str) -> Run:
    return ready_run(state, resolve_cli_ref(state.store, ref))


def list_runs(state: AppState, name: str | None = None, tag: str | None = None,
              status: Literal["queued", "ingesting", "ready", "failed"] | None = None,
              limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """List runs, newest first (id, name, status, span, slices per lane); filter by name substring, tag, status."""
    found = body(runs.list_runs(state, name=name, tag=tag, status=status, limit=limit, offset=0))
    more = found["total"] - len(found["runs"])
    return {**found, "truncated": [f"truncated, {more:,} more runs — narrow with name=, tag= or status="]
            if more > 0 else []}


def ingest_path(state: AppState, paths: Annotated[list[str], Field(min_length=1, max_length=64)],
                name: Annotated[str | None, Field(max_length=200)] = None,
                limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """Ingest trace files, folders or archives on this machine as one run (an identical ready run is reused) and
    return the run. Local (stdio) server only."""
    from explorer.runs.ingest import ingest_paths
    from explorer.runs.records import find_identical

    files = [Path(p).expanduser() for p in paths]
    existing = find_identical(state.store, files)
    rec = existing or ingest_paths(state.store, files, name)
    return {"run": body(run_json(rec)), "reused": existing is not None}


def run_summary(state: AppState, run: RunRef, limit: Rows = DEFAULT_ROWS,
                max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """A run: id, name, status, span, slice counts per lane, devices, warnings. Start here."""
    return body(runs.get_run(resolve_cli_ref(state.store, run)))


def ops_tool(state: AppState, run: RunRef, view: Literal["operators", "python", "all"] = "operators",
        sort: Annotated[str | None, Field(max_length=40, description="column, -column (descending) or +column")] = None,
        q: Annotated[str, Field(max_length=500, description="name substring")] = "",
        by_shape: bool = False, by_module: bool = False, rank: Ranks = None,
        start_ns: RelTime = None, end_ns: RelTime = None,
        limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """The op table (like torch.profiler key_averages()): calls, CPU total/self, device total/self per op, sorted by
    self device time (self CPU without a device). view=python lists with_stack frames, view=all everything."""
    query = OpsQuery(sort, q, by_shape, None, view, by_module, rank or "", start_ns, end_ns)
    return body(ops.ops(ready(state, run), state, query))


def kernels_tool(state: AppState, run: RunRef,
                 sort: Annotated[str, Field(max_length=40)] = "-total_ns",
                 q: Annotated[str, Field(max_length=500, description="name substring")] = "",
                 category: Annotated[str, Field(max_length=40, description="e.g. gemm, attention, memcpy")] = "",
                 rank: Ranks = None, limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """Device executions by name (kernels, memcpy, memset): calls, total/avg/p50/p95 ns, % of device time, the ops
    that launched them; and device time per category."""
    return body(kernels.kernels(ready(state, run), KernelsQuery(sort, q, category, None, rank or "")))


def steps_tool(state: AppState, run: RunRef,
          annotation: Annotated[str, Field(min_length=1, max_length=200)] = "ProfilerStep#",
          limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """One row per training step: step time, device busy, compute / communication / memcpy / idle ns, slowest."""
    return body(steps.steps(ready(state, run), annotation=annotation))


def gaps(state: AppState, run: RunRef, rank: Ranks = None, limit: Rows = DEFAULT_ROWS,
         max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """Busy/idle per lane and device, and the largest gaps between device executions, each with its cause and the
    host activity over it (the evidence)."""
    return body(overview.breakdown(ready(state, run), rank=rank))


def timeline_window(state: AppState, run: RunRef, start_ns: RelTime = None, end_ns: RelTime = None,
                    lanes: Annotated[str | None, Field(max_length=500, description="comma-separated lanes")] = None,
                    order: Literal["duration", "time"] = "duration",
                    limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """A window of the timeline (relative ns; the whole run by default) as a compact list of slices: track, name,
    start, duration, depth; spans narrower than a pixel of 1000 come merged (`count` slices). Longest first."""
    rec = ready(state, run)
    window = body(timeline.timeline(rec, state, start_ns=start_ns, end_ns=end_ns, width_px=1000,
                                    height_px=4000, tracks=None, lanes=lanes, profile=None, device_color="opcode"))
    return compact_window(window, track_labels(state, rec.id), order)


def track_labels(state: AppState, run_id: str) -> dict[int, str]:
    table = state.store.table(run_id, "tracks").select(["track_id", "lane", "label"]).to_pydict()
    return {t: f"{lane}: {label}" for t, lane, label in zip(table["track_id"], table["lane"], table["label"],
                                                             strict=True)}


def compact_window(window: dict[str, Any], labels: dict[int, str], order: str) -> dict[str, Any]:
    """The slices of a timeline window as rows (names resolved), longest first or in time order."""
    names, rows = window["names"], []
    for track in window["tracks"]:
        label = labels.get(track["track_id"], str(track["track_id"]))
        for part, merged in (("slices", False), ("merged", True)):
            cols = track.get(part)
            if not cols:
                continue
            for i in range(len(cols["ts"])):
                row = {"track": label, "name": names[cols["name"][i]], "start_ns": cols["ts"][i],
                       "dur_ns": cols["dur"][i], "depth": cols["depth"][i]}
                row |= {"count": cols["count"][i]} if merged else {"slice_id": cols["id"][i]}
                rows.append(row)
    rows.sort(key=(lambda r: (-r["dur_ns"], r["start_ns"])) if order == "duration" else
              (lambda r: (r["start_ns"], -r["dur_ns"])))
    return {"start_ns": window["start_ns"], "end_ns": window["end_ns"], "slices": rows,
            "tracks_summarised": window["tracks_summarised"]}


def chain(state: AppState, run: RunRef, slice_id: Annotated[int, Field(ge=0, le=2**62)],
          limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """One slice (op or kernel) with all its args, its parents, children and the linked chain across lanes
    (Python frame -> op -> runtime launch -> kernel). slice ids come from timeline_window and search."""
    return body(timeline.event(ready(state, run), state, slice_id))


def search(state: AppState, run: RunRef, q: Annotated[str, Field(min_length=1, max_length=500)],
           regex: bool = False, args: bool = False,
           limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """Slices whose name matches `q` (substring, or a regex), over the whole run: the count and the first ones
    in time order with their slice ids."""
    found = body(timeline.search(ready(state, run), q=q, regex=regex, args=args, limit=limit))
    more = found["count"] - len(found["matches"])
    return {**found, "truncated": [f"truncated, {more:,} more matches — narrow with a longer q or regex=true"]
            if more > 0 else []}


def sql_tool(state: AppState, run: RunRef, query: Annotated[str, Field(min_length=1, max_length=20_000)],
             limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """One read-only SELECT over the run's tables (slices, tracks, flows, counters, instants, op_stats,
    op_stats_by_shape), in the SQL page's sandbox and limits. Times are absolute integer ns."""
    result = body(sql.sql_get(ready(state, run), query, state))
    cut = result.pop("truncated")
    return {**result, "row_limit_hit": cut}


def compare_tool(state: AppState, run_ids: Annotated[list[str], Field(min_length=2, max_length=8)],
            baseline: str | None = None, limit: Rows = DEFAULT_ROWS,
            max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """Two to eight runs (ids) op by op and kernel by kernel against the baseline, with a headline."""
    return body(compare.compare(state, ",".join(run_ids), baseline))


def check_tool(state: AppState, baseline: RunRef, candidate: RunRef,
               metric: Annotated[list[str] | None, Field(max_length=50)] = None,
               max_regression: Annotated[str, Field(max_length=20)] = "5%",
               limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """The CI regression gate: candidate against baseline metric by metric (device_total, cpu_total, step_time,
    op:NAME, kernel:NAME); `passed` false when one regressed by more than max_regression."""
    return body(check.check(state, baseline, candidate, metric, max_regression))


def ranks_tool(state: AppState, run: RunRef, limit: Rows = DEFAULT_ROWS,
               max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """One row per rank of a multi-rank run: step time, compute / exposed communication / idle, lateness to
    collectives, and the stragglers with their evidence."""
    return body(ranks.ranks(ready(state, run)))


def collectives_tool(state: AppState, run: RunRef, sort: Annotated[str, Field(max_length=40)] = COLLECTIVES_SORT,
                     limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """Collectives matched across ranks: per rank arrival and wait, the last arriver, size, bandwidth."""
    return body(collectives.collectives(ready(state, run), sort=sort, limit=None))


def device_profiles(state: AppState, run: RunRef, limit: Rows = DEFAULT_ROWS,
                    max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """The run's Neuron device profiles (ids, names, windows)."""
    return body(device.device_profiles(ready(state, run), state))


def device_summary(state: AppState, run: RunRef, profile: str | None = None, start_ns: RelTime = None,
                   end_ns: RelTime = None, core: Annotated[int | None, Field(ge=0, le=4096)] = None,
                   limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """A Neuron device profile's Summary metrics and recommendations; with start_ns/end_ns (relative) or core,
    recomputed over that window. `*_percent` metrics are fractions of 1, as the export writes them (0.974 = 97.4 %)."""
    return body(device.device_summary(ready(state, run), state, profile=profile, start_ns=start_ns, end_ns=end_ns,
                                      core=core))


def memory_tool(state: AppState, run: RunRef,
                baseline: Annotated[str, Field(max_length=64, description="a run id to compare the peak with")] = "",
                limit: Rows = DEFAULT_ROWS, max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """Where the memory goes (profile_memory=True traces, allocator snapshots): per device the peak, its time and
    what was live at it by owner op, module and size; top allocators, leaks (live at the end), churn per step."""
    return body(memory.memory(ready(state, run), state, baseline=baseline))


def advice_tool(state: AppState, run: RunRef, limit: Rows = DEFAULT_ROWS,
                max_chars: Chars = DEFAULT_CHARS) -> dict[str, Any]:
    """What to fix first: the advisor's findings, largest expected saving first, each with its symptom, evidence,
    the fix, the expected saving (ns, never more than the time it acts on) and its formula, confidence, effort."""
    return body(advice.advice(ready(state, run)))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("list_runs", list_runs, "name=, tag= or status=", "GET /api/runs"),
    ToolSpec("ingest_path", ingest_path, "fewer paths", "POST /api/runs (upload)", local_only=True),
    ToolSpec("run_summary", run_summary, "gaps, kernels or ops for the details", "GET /api/runs/{id}"),
    ToolSpec("ops", ops_tool, "q=, view=, rank=, start_ns=/end_ns=", "GET /api/runs/{id}/ops"),
    ToolSpec("kernels", kernels_tool, "q=, category= or rank=", "GET /api/runs/{id}/kernels"),
    ToolSpec("steps", steps_tool, "annotation=", "GET /api/runs/{id}/steps"),
    ToolSpec("gaps", gaps, "rank=", "GET /api/runs/{id}/breakdown"),
    ToolSpec("timeline_window", timeline_window, "a narrower start_ns/end_ns or lanes=", "GET /api/runs/{id}/timeline"),
    ToolSpec("chain", chain, "another slice_id", "GET /api/runs/{id}/events/{slice_id}"),
    ToolSpec("search", search, "a longer q", "GET /api/runs/{id}/search"),
    ToolSpec("sql", sql_tool, "WHERE, GROUP BY or LIMIT in the query", "GET /api/runs/{id}/sql"),
    ToolSpec("compare", compare_tool, "fewer runs", "GET /api/compare"),
    ToolSpec("check", check_tool, "metric=", "GET /api/check"),
    ToolSpec("ranks", ranks_tool, "rank= on ops, kernels or gaps for one rank", "GET /api/runs/{id}/ranks"),
    ToolSpec("collectives", collectives_tool, "sort=", "GET /api/runs/{id}/collectives"),
    ToolSpec("device_profiles", device_profiles, "another run", "GET /api/runs/{id}/device/profiles"),
    ToolSpec("device_summary", device_summary, "profile=, start_ns=/end_ns= or core=",
             "GET /api/runs/{id}/device/summary"),
    ToolSpec("memory", memory_tool, "baseline= or another run", "GET /api/runs/{id}/memory"),
    ToolSpec("advice", advice_tool, "the findings' evidence links, or ops / kernels for one finding",
             "GET /api/runs/{id}/advice"),
)
