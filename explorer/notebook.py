"""The Python API for notebooks: `open_run(path_or_id)` gives a `Run` whose tables are pyarrow Tables
(`.to_pandas()`, `polars.from_arrow()`), computed by the very functions the HTTP API's routes call.

Nothing here computes a number of its own: it picks the API's function, then turns its rows into a table.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import jinja2
import numpy as np
import pyarrow as pa

from explorer.analysis.kernels import DEFAULT_KERNEL_SORT
from explorer.analysis.timeline.levels import gather, window_ranges
from explorer.config import Settings
from explorer.errors import BadRequest, RunNotFound
from explorer.model.advice_shapes import AdviceResult
from explorer.model.lanes import Lane
from explorer.model.shapes import CompareResult, DiffRow
from explorer.runs.ingest import ingest_paths
from explorer.runs.records import content_sha256
from explorer.runs.run import Run as StoredRun
from explorer.store.catalog.catalog import RunRecord
from explorer.store.queries import DEFAULT_OP_VIEW
from explorer.store.runs import RunStore
from explorer.store.sql import run_sql
from explorer.views.advice import run_advice
from explorer.views.compare import compute_run_compare
from explorer.views.device_chain import run_chain_json
from explorer.views.kernels import KernelsQuery, compute_run_kernels
from explorer.views.links import run_json
from explorer.views.memory import MemoryResult, compute_run_memory
from explorer.views.ops import OpsQuery, build_ops_page, compute_run_ops
from explorer.views.render import make_environment

SLICE_COLUMNS = ("slice_id", "track_id", "lane", "ts_ns", "dur_ns", "depth", "name", "cat", "parent_id",
                 "correlation", "external_id")
REPR_TOP_OPS = 10  # rows of the op table a notebook cell shows
LANES = tuple(lane.value for lane in Lane)
T = TypeVar("T")


def open_run(path_or_id: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None = None,
             name: str | None = None) -> Run:
    """A run of the data folder (default: the CLI's: $EXPLORER_DATA_DIR, else ~/.local/share/trace-explorer).

    A path to a trace file, folder or archive is ingested, unless a run of the same content (the same
    sha256 the server's upload deduplicates by) is already there, which is then reused; anything else is
    a run id, or else the name of the newest ready run so named (RunNotFound when neither)."""
    settings = Settings() if data_dir is None else Settings(data_dir=Path(data_dir))
    store = RunStore.from_settings(settings)
    path = Path(path_or_id)
    if path.exists():
        rec = store.catalog.find_by_sha(content_sha256([path])) or ingest_paths(store, [path], name)
    else:
        rec = _find_run(store, str(path_or_id))
    return Run(StoredRun.of(store, rec.id), settings)


def _find_run(store: RunStore, key: str) -> RunRecord:
    try:
        return store.get(key)
    except RunNotFound:
        named = [r for r in store.catalog.list(name=key, status="ready", limit=1000)[0] if r.name == key]
        if not named:
            raise RunNotFound(key) from None
        return named[0]  # newest first


@dataclass
class Run:
    """One ready run, as pyarrow Tables: a thin wrapper over `explorer.runs.Run` (what the server asks too).
    Times are integer ns; window arguments and `ts_ns` in `.slices()` are relative to the run's origin
    (`origin_ns`), as in the HTTP API."""

    run: StoredRun
    settings: Settings

    @property
    def store(self) -> RunStore:
        return self.run.store

    @property
    def record(self) -> RunRecord:
        return self.run.record

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def origin_ns(self) -> int:
        return self.record.summary.start_ns

    @property
    def span_ns(self) -> int:
        return self.record.summary.span_ns

    def info(self) -> dict[str, Any]:
        """The run as GET /api/runs/{id} returns it."""
        return dict(run_json(self.record))

    def ops(self, view: str = DEFAULT_OP_VIEW, by_shape: bool = False, by_module: bool = False,
            sort: str | None = None, q: str = "", limit: int | None = None, start_ns: int | None = None,
            end_ns: int | None = None) -> pa.Table:
        """The op table (like key_averages()): the rows of GET /api/runs/{id}/ops with the same arguments."""
        data = compute_run_ops(self.run, OpsQuery(sort, q, by_shape, limit, view, by_module, "", start_ns, end_ns))
        return rows_table(data["rows"])

    def kernels(self, sort: str = DEFAULT_KERNEL_SORT, q: str = "", category: str = "",
                limit: int | None = None) -> pa.Table:
        """Device executions by name: the rows of GET /api/runs/{id}/kernels."""
        return rows_table(compute_run_kernels(self.run, KernelsQuery(sort, q, category, limit))["rows"])

    def breakdown(self, by: str = "lane") -> pa.Table:
        """Busy/idle time per lane (`by="lane"`) or per device (`by="device"`), as in GET .../breakdown."""
        if by not in ("lane", "device"):
            raise BadRequest(f"breakdown by {by!r}: choose 'lane' or 'device'")
        data = self.run.breakdown()
        return rows_table(data["lanes"] if by == "lane" else data["devices"])

    def gaps(self) -> pa.Table:
        """The largest gaps between device executions (relative ns) with their cause, as in GET
        .../breakdown (`gaps.largest`); the slices before and after flattened to `before.slice_id`, ...."""
        return rows_table(self.run.breakdown()["gaps"]["largest"]).flatten()

    def slices(self, start_ns: int | None = None, end_ns: int | None = None,
               lane: str | Lane | None = None) -> pa.Table:
        """Every slice overlapping [start_ns, end_ns] (relative, the whole run by default), on one lane or all:
        the slices the timeline window (GET .../timeline) draws or merges there, each one row, by time."""
        first_start, first_end = self.run.default_window()
        start = first_start if start_ns is None else start_ns
        end = first_end if end_ns is None else end_ns
        if end <= start:
            raise BadRequest(f"end_ns ({end}) must be greater than start_ns ({start})")
        if lane is not None and str(lane) not in LANES:
            raise BadRequest(f"no lane {str(lane)!r}; lanes: {', '.join(LANES)}")
        index = self.run.timeline_index()
        tracks = [t for t, kind in index.track_kind.items() if kind == "slice"
                  and (lane is None or index.track_lane[t] == str(lane))]
        groups = np.flatnonzero(np.isin(index.group_track, np.asarray(tracks, np.int32)))
        pos, _ = gather(*window_ranges(index.ts, index.end_max, index.group_lo, index.group_hi, groups, start, end))
        pos = pos[index.ts[pos] + index.dur[pos] >= start]  # the running maximum let earlier ones in
        pos = pos[np.lexsort((index.slice_id[pos], index.ts[pos]))]
        table = self.run.table("slices").take(pa.array(index.slice_id[pos]))
        ts = pa.array(index.ts[pos], pa.int64())
        return table.set_column(table.schema.get_field_index("ts_ns"), "ts_ns", ts).select(list(SLICE_COLUMNS))

    def sql(self, query: str) -> pa.Table:
        """One read-only SELECT over the run's tables, as POST /api/runs/{id}/sql runs it (same limits)."""
        s = self.settings
        result = run_sql(self.store, self.id, query, s.sql_timeout_s, s.sql_max_rows)
        if result.truncated:
            warnings.warn(f"SQL result cut at {s.sql_max_rows} rows (Settings.sql_max_rows)", stacklevel=2)
        values = list(zip(*result.rows, strict=True)) if result.rows else [()] * len(result.columns)
        return pa.Table.from_arrays([pa.array(list(v)) for v in values], names=result.columns)

    def compare(self, *others: Run | str, baseline: str | None = None, kernels: bool = False) -> pa.Table:
        """This run against others (runs or ids), op by op (or kernel by kernel) as GET /api/compare: one row
        per name and run, the baseline's first; `delta_*` and `pct_change` against the baseline."""
        sides = [self.run, *(o.run if isinstance(o, Run) else StoredRun.of(self.store, o) for o in others)]
        data = compute_run_compare(sides, baseline)
        return compare_table(data, kernels)

    def memory(self, baseline: Run | str | None = None) -> MemoryResult:
        """Where the bytes go, as GET /api/runs/{id}/memory: per device the peak (bytes, time, what is live at it by
        owner op / module / size), the timeline by owner, leaks, churn per step; allocator snapshots and
        export_memory_timeline categories when the run has them; with a baseline run, each peak against its."""
        other = baseline.id if isinstance(baseline, Run) else (baseline or "")
        return compute_run_memory(self.store, self.id, other)

    def device_chain(self, profile: str, node: str, mode: str = "trace") -> dict[str, Any]:
        """What an instruction or DMA transfer of a device profile waited on and what waited on it, walked one
        step (`mode="step"`) or to its root cause: GET /api/runs/{id}/device/{profile}/chain's answer."""
        return dict(run_chain_json(self.store, self.record, profile, node, mode))

    def advice(self) -> AdviceResult:
        """The advisor's findings, largest expected saving first: GET /api/runs/{id}/advice."""
        return run_advice(self.run)

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, name={self.name!r}, span_ns={self.span_ns})"

    def _repr_html_(self) -> str:
        """The summary and the top of the op table, as a Jupyter cell shows it (names escaped)."""
        ops = build_ops_page(self.run, OpsQuery(limit=REPR_TOP_OPS))
        return _environment().get_template("_notebook_run.html").render(run=run_json(self.record), ops=ops,
                                                                        client_sort=True)


@cache
def _environment() -> jinja2.Environment:
    return make_environment()


def rows_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """API rows as a table: a column for every key any row has (in order of first use), null where a row
    lacks it (pyarrow's from_pylist would keep only the first row's keys)."""
    listed = list(rows)
    columns = dict.fromkeys(k for r in listed for k in r)
    return pa.table({k: pa.array([r.get(k) for r in listed]) for k in columns})


def compare_table(data: CompareResult, kernels: bool = False) -> pa.Table:
    """GET /api/compare's rows in long form: per name, one row for each run that has it or lost it."""
    runs = [r["id"] for r in data["runs"]]
    diff: list[DiffRow] = data["kernels"]["rows"] if kernels else data["rows"]
    out = []
    for row in diff:
        for i, run_id in enumerate(runs):
            values = row["per_run"][i]
            entry: dict[str, Any] = {"name": row["name"], "status": row["status"], "run": run_id,
                                     "baseline": i == 0, **(values or {})}
            if i:
                vs = row["vs_baseline"][i - 1]
                entry |= {"run_status": vs["status"], "pct_change": vs["pct_change"],
                          **{f"delta_{k}": v for k, v in vs.items() if k not in ("run", "status", "pct_change")}}
            out.append(entry)
    return rows_table(out)
