"""The `trace-explorer` command line: ingest, runs, ops (and more commands registered by other modules).

Printing happens here and nowhere else in the core.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from explorer import __version__
from explorer.config import Settings
from explorer.errors import ExplorerError
from explorer.model.lanes import Lane
from explorer.store.catalog import RunRecord
from explorer.store.runs import RunStore

console = Console(stderr=True, soft_wrap=True)  # one error, one line: never wrapped at 80 columns
# piped output (scripts, `| less`) gets a wide table rather than rich's 80-column default
out = Console() if Console().is_terminal else Console(width=200)


def fmt_ns(ns: int | float) -> str:
    """Human duration from nanoseconds (edge formatting only)."""
    v = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.3f} {unit}"
    return f"{v:,.0f} ns"


def _store(data_dir: Path | None) -> RunStore:
    settings = Settings() if data_dir is None else Settings(data_dir=data_dir)
    return RunStore(settings.data_dir, settings.cache_runs, settings.op_table_cache)


data_dir_option = click.option("--data-dir", type=click.Path(path_type=Path), default=None,
                               help="Data folder (default ./explorer-data or $EXPLORER_DATA_DIR)")


@click.group()
@click.version_option(__version__)
def main() -> None:
    """Trace Explorer: ingest, analyse and serve ML profiler traces."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Run name (default: from the first file)")
@click.option("--tag", "tags", multiple=True, help="Tag the run (repeatable)")
@data_dir_option
def ingest(paths: tuple[Path, ...], name: str | None, tags: tuple[str, ...], data_dir: Path | None) -> None:
    """Ingest trace files, folders or archives as one run; prints the run id."""
    from explorer.service import ingest_paths

    # an ingest bug's traceback goes to bugs/<run>.txt (its error line says so), not to the terminal
    logging.getLogger("explorer.service").addHandler(logging.NullHandler())
    store = _store(data_dir)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("ingesting", total=1.0)

        def progress(fraction: float, what: str) -> None:
            bar.update(task, completed=fraction, description=what[:60])

        try:
            rec = ingest_paths(store, list(paths), name, progress=progress)
        except ExplorerError as exc:
            bar.stop()
            console.print(f"[red]error:[/red] {escape(exc.message)}", markup=True, highlight=False)
            sys.exit(2)
    if tags:
        store.catalog.set_tags(rec.id, list(tags))
    s = rec.summary
    console.print(f"ingested {s.slices:,} slices on {s.tracks} tracks, span {fmt_ns(s.span_ns)}, "
                  f"{s.warning_count} warnings", highlight=False)
    for w in s.warnings[:10]:
        console.print(f"  warning: {w.count} x {w.message}", highlight=False, markup=False)
    out.print(rec.id, highlight=False)


def run_row(rec: RunRecord) -> dict[str, Any]:
    s = rec.summary
    return {
        "id": rec.id, "name": rec.name, "status": rec.status, "message": rec.message, "tags": rec.tags,
        "span_ns": s.span_ns, "slices": s.slices, "slices_per_lane": s.slices_per_lane, "created_at": rec.created_at,
    }


RUNS_TABLE_LANES = (Lane.FRAMEWORK, Lane.RUNTIME, Lane.HARDWARE)  # the `runs` table's slice counts


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON")
@data_dir_option
def runs(as_json: bool, data_dir: Path | None) -> None:
    """List runs: id, name, status, span, slices per lane."""
    store = _store(data_dir)
    records, _ = store.catalog.list(limit=10000)
    rows = [run_row(r) for r in records]
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table = Table("id", "name", "status", "span", *RUNS_TABLE_LANES, "total")
    for r in rows:
        lanes = r["slices_per_lane"]
        table.add_row(r["id"], r["name"], r["status"], fmt_ns(r["span_ns"]), *(
            f"{lanes.get(k, 0):,}" for k in RUNS_TABLE_LANES), f"{r['slices']:,}")
    out.print(table)


OP_SORTS = ("device_total_ns", "self_device_ns", "cpu_total_ns", "self_cpu_ns", "calls", "name", "cpu_avg_ns")
OP_VIEW_CHOICES = ("operators", "python", "all")  # explorer.store.queries.OP_VIEWS (a test pins them equal)


@main.command()
@click.argument("run_id")
@click.option("--view", type=click.Choice(OP_VIEW_CHOICES), default="operators", show_default=True,
              help="operators: ATen ops and annotations; python: with_stack frames; all: key_averages()")
@click.option("--sort", type=click.Choice(OP_SORTS), default=None,
              help="Column, descending [default: self_device_ns, or self_cpu_ns without device time]")
@click.option("--limit", type=int, default=30, show_default=True)
@click.option("--by-shape", is_flag=True, help="Group by input shapes as well as name")
@click.option("--by-module", is_flag=True, help="Group by enclosing nn.Module path (with_modules traces)")
@click.option("--json", "as_json", is_flag=True, help="Print JSON")
@data_dir_option
def ops(run_id: str, view: str, sort: str | None, limit: int, by_shape: bool, by_module: bool, as_json: bool,
        data_dir: Path | None) -> None:
    """The op table of a run (like torch.profiler key_averages())."""
    from explorer.store.queries import load_ops

    store = _store(data_dir)
    try:
        rows = load_ops(store, run_id, sort=sort, limit=limit, by_shape=by_shape, view=view, by_module=by_module)
    except ExplorerError as exc:
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    if as_json:  # without by_shape the per-name table's input_shapes is always "": not shown
        out.print_json(json.dumps(rows if by_shape else [{k: v for k, v in r.items() if k != "input_shapes"}
                                                          for r in rows]))
        return
    table = Table(*(["module"] if by_module else []), "name", *(["input shapes"] if by_shape else []), "calls",
                  "CPU total", "self CPU", "CPU avg", "device total", "self device", "device %")
    for r in rows:
        table.add_row(*([r["module"]] if by_module else []), r["name"], *([r["input_shapes"]] if by_shape else []),
                      f"{r['calls']:,}", fmt_ns(r["cpu_total_ns"]), fmt_ns(r["self_cpu_ns"]),
                      fmt_ns(r["cpu_avg_ns"]), fmt_ns(r["device_total_ns"]), fmt_ns(r["self_device_ns"]),
                      f"{r['device_pct']:.1f}%")
    out.print(table)


@main.command()
@click.argument("run_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write (default report-RUN.html)")
@data_dir_option
def report(run_id: str, output: Path | None, data_dir: Path | None) -> None:
    """Write one self-contained HTML report of a run (opens offline, without the server)."""
    from explorer.report import write_report

    target = output or Path(f"report-{run_id}.html")
    try:
        size = write_report(_store(data_dir), run_id, target)
    except ExplorerError as exc:
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    console.print(f"wrote {target} ({size / 1e6:.1f} MB)", highlight=False, markup=False)


if __name__ == "__main__":
    main()
