"""The table commands a script or an agent reads: `kernels`, `steps`, `gaps` and `ranks` of a run, each the rows of
its API twin (same field names, docs/cli-output.md) as a table, `--json` or `--markdown` (explorer/cli_output.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from explorer.cli import RUN_HELP, _run_id, _store, console, fmt_ns, out, store_options
from explorer.cli_output import Column, emit, format_options
from explorer.errors import ExplorerError


def _ns(key: str) -> Any:
    return lambda r: fmt_ns(r[key])


def _pct(key: str) -> Any:
    return lambda r: f"{r[key]:.1f}%"


def _text(key: str) -> Any:
    return lambda r: "" if r[key] is None else str(r[key])


def _count(key: str) -> Any:
    return lambda r: f"{r[key]:,}"


KERNEL_COLUMNS = (Column("name", _text("name"), name=True), Column("category", _text("category")),
                  Column("calls", _count("calls")), Column("total", _ns("total_ns")), Column("avg", _ns("avg_ns")),
                  Column("p50", _ns("p50_ns")), Column("p95", _ns("p95_ns")), Column("device %", _pct("device_pct")))
STEP_COLUMNS = (Column("step", _text("name"), name=True), Column("rank", _text("rank")), Column("time", _ns("dur_ns")),
                Column("device busy", _ns("busy_ns")), Column("compute", _ns("compute_ns")),
                Column("communication", _ns("communication_ns")), Column("memcpy", _ns("memcpy_ns")),
                Column("idle", _ns("idle_ns")), Column("busy %", _pct("busy_pct")))
GAP_COLUMNS = (Column("start", _ns("start")), Column("gap", _ns("dur_ns")), Column("device", _text("device"), name=True),
               Column("cause", _text("cause")), Column("evidence", _text("cause_detail"), name=True))
RANK_COLUMNS = (Column("rank", _text("rank")), Column("mode", _text("mode")), Column("step time", _ns("step_time_ns")),
                Column("compute", _ns("compute_ns")), Column("exposed comm", _ns("exposed_comm_ns")),
                Column("idle", _ns("idle_ns")), Column("busy %", _pct("busy_pct")),
                Column("late to collectives", _ns("arrival_late_ns")),
                Column("straggler", lambda r: "yes" if r["straggler"] else ""))


def _fail(exc: ExplorerError) -> NoReturn:
    console.print(f"error: {exc.message}")
    sys.exit(2)


@click.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@click.option("--sort", default="-total_ns", show_default=True, help="Column, -column or +column (as the API's sort=)")
@click.option("--category", default="", help="Only this category (e.g. gemm, memcpy HtoD)")
@click.option("--limit", type=int, default=30, show_default=True)
@format_options
@store_options
def kernels(run_id: str, sort: str, category: str, limit: int, fmt: str, data_dir: Path | None) -> None:
    """Device executions of a run by name: calls, total / avg / p50 / p95, % of device time."""
    from explorer.runs.run import Run
    from explorer.views.kernels import KernelsQuery, compute_run_kernels

    store = _store(data_dir)
    try:
        run = Run.of(store, _run_id(store, run_id))
        rows = compute_run_kernels(run, KernelsQuery(sort=sort, category=category))["rows"]
    except ExplorerError as exc:
        _fail(exc)
    emit(out, fmt, rows[:max(0, limit)], KERNEL_COLUMNS)
    if len(rows) > limit:
        console.print(f"showing {limit} of {len(rows)} rows (--limit N shows more)")


@click.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@click.option("--annotation", default="ProfilerStep#", show_default=True, help="Step slices' name prefix")
@format_options
@store_options
def steps(run_id: str, annotation: str, fmt: str, data_dir: Path | None) -> None:
    """One row per step: step time, device busy, compute / communication / memcpy / idle."""
    from explorer.runs.run import Run

    store = _store(data_dir)
    try:
        result = Run.of(store, _run_id(store, run_id)).steps(annotation)
    except ExplorerError as exc:
        _fail(exc)
    emit(out, fmt, result["steps"], STEP_COLUMNS)
    if not result["steps"]:
        console.print(f"no steps: no slice name starts with {annotation!r}")


@click.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@click.option("--limit", type=int, default=30, show_default=True)
@format_options
@store_options
def gaps(run_id: str, limit: int, fmt: str, data_dir: Path | None) -> None:
    """The largest gaps between a run's device executions, each with its cause and the host evidence over it."""
    from explorer.runs.run import Run

    store = _store(data_dir)
    try:
        found = Run.of(store, _run_id(store, run_id)).breakdown()["gaps"]
    except ExplorerError as exc:
        _fail(exc)
    emit(out, fmt, found["largest"][:max(0, limit)], GAP_COLUMNS)
    console.print(f"{found['count']:,} gaps, {fmt_ns(found['total_ns'])} in all; listed: those of at least "
                  f"{fmt_ns(found['min_gap_ns'])}")


@click.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@format_options
@store_options
def ranks(run_id: str, fmt: str, data_dir: Path | None) -> None:
    """One row per rank: step time, compute, exposed communication, idle, lateness, stragglers."""
    from explorer.runs.run import Run

    store = _store(data_dir)
    try:
        result = Run.of(store, _run_id(store, run_id)).ranks()
    except ExplorerError as exc:
        _fail(exc)
    emit(out, fmt, result["ranks"], RANK_COLUMNS)
    if not result["ranks"]:
        console.print("no rank information in this run")


COMMANDS = (kernels, steps, gaps, ranks)
