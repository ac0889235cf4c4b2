"""The `trace-explorer` command line: ingest, runs, ops (and more commands registered by other modules).

Printing happens here and nowhere else in the core.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from explorer import __version__
from explorer.cli_output import Column, emit, format_options
from explorer.errors import ExplorerError, require_extra

if TYPE_CHECKING:  # the heavy layers are imported by the commands that use them: --help and --version stay fast
    from explorer.config import Settings
    from explorer.store.catalog.catalog import RunRecord
    from explorer.store.runs import RunStore

# Names from traces are printed literally: no console interprets `[...]` as markup or `:x:` as an emoji code
# (an op named `load [/data/shard_0.bin]` would be a MarkupError, `[param|cuda]` would print blank).
console = Console(stderr=True, soft_wrap=True, markup=False, emoji=False, highlight=False)  # one error, one line
# piped output (scripts, `| less`) gets a wide table rather than rich's 80-column default
out = Console(width=None if Console().is_terminal else 200, markup=False, emoji=False, highlight=False)


def fmt_ns(ns: int | float) -> str:
    """Human duration from nanoseconds (edge formatting only)."""
    v = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.3f} {unit}"
    return f"{v:,.0f} ns"


def _settings(data_dir: Path | None) -> Settings:
    """Settings with the command's --data-dir, --catalog-url and --storage (kept in the click context) applied."""
    from explorer.config import Settings

    given: dict[str, Any] = {"data_dir": data_dir, "catalog_url": _given(CATALOG_URL_KEY),
                             "storage": _given(STORAGE_KEY)}
    return Settings(**{k: v for k, v in given.items() if v is not None})


def _given(key: str) -> str | None:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(key) if ctx is not None else None


def _data_dir(data_dir: Path | None) -> Path:
    """The folder a command reads: --data-dir, else $EXPLORER_DATA_DIR, else explorer.config.default_data_dir()."""
    return _settings(data_dir).data_dir


def _no_folder(folder: Path) -> str:
    return (f"no data folder at {folder}: nothing was ingested here. Pass --data-dir or set EXPLORER_DATA_DIR to "
            "read another one.")


def _store(data_dir: Path | None, create: bool = False) -> RunStore:
    """The runs of the command's data folder, once what a killed ingest left there is recovered
    (RunStore.recover_dead_ingests: its run failed, its scratch removed), so no command shows a dead ingest as
    `ingesting`; a command that only reads (`create` false) never makes the folder: a missing one is an error
    that names it."""
    from explorer.config import LEGACY_DATA_DIR, user_data_dir
    from explorer.store.runs import RunStore

    settings = _settings(data_dir)
    if "data_dir" not in settings.model_fields_set and settings.data_dir == LEGACY_DATA_DIR.resolve():
        console.print(f"using {settings.data_dir}, found in the current folder (elsewhere the default is "
                      f"{user_data_dir(settings.xdg_data_home)}; --data-dir or EXPLORER_DATA_DIR choose)", soft_wrap=True)
    if not create and not settings.catalog_url and not settings.storage and not settings.data_dir.is_dir():
        console.print(f"error: {_no_folder(settings.data_dir.resolve())}", soft_wrap=True)
        sys.exit(2)
    try:
        store = RunStore.from_settings(settings)
        recovered = store.recover_dead_ingests()
    except ExplorerError as exc:  # the catalog database does not answer or needs `db upgrade`; a bad --storage
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    if recovered:
        console.print(f"{recovered} run(s) marked failed: their ingest process was killed before it finished",
                      markup=False, highlight=False)
    return store


def _remember(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.meta[STORAGE_KEY if param.name == "storage" else CATALOG_URL_KEY] = value


data_dir_option = click.option("--data-dir", type=click.Path(path_type=Path), default=None,
                               help="Data folder (default $EXPLORER_DATA_DIR, else ./explorer-data where the current folder has one, "
                               "else ~/.local/share/trace-explorer)")
CATALOG_URL_KEY = "explorer.catalog_url"
# not a parameter of each command: _settings reads it from the click context, as for every store command
catalog_url_option = click.option(
    "--catalog-url", default=None, expose_value=False, callback=_remember,
    help="Catalog database, e.g. postgresql://user@host:5432/db (default $EXPLORER_CATALOG_URL, else "
    "catalog.sqlite in the data folder)")


STORAGE_KEY = "explorer.storage"
STORAGE_HELP = ("Where runs' files live: a folder or file:///mnt/fsx/explorer, or s3://bucket/prefix (endpoint, "
                "region, credentials from the AWS_* variables) (default $EXPLORER_STORAGE, else the data folder)")
storage_option = click.option("--storage", default=None, expose_value=False, callback=_remember, help=STORAGE_HELP)


def store_options(command: Any) -> Any:
    """--data-dir, --catalog-url and --storage: where a command finds the runs."""
    return data_dir_option(catalog_url_option(storage_option(command)))


@click.group()
@click.version_option(__version__)
def main() -> None:
    """Trace Explorer: ingest, analyse and serve ML profiler traces."""
    if not faulthandler.is_enabled() and sys.__stderr__ is not None:
        faulthandler.enable(sys.__stderr__)  # a crash in compiled code (a reader, a library): every thread's stack


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Run name (default: from the first file)")
@click.option("--tag", "tags", multiple=True, help="Tag the run (repeatable)")
@click.option("--again", is_flag=True, help="Make a new run even when a ready run holds exactly these files")
@click.option("--one-run", is_flag=True,
              help="Make one run of a folder of unrelated traces (default: one run per step and folder, as --watch)")
@store_options
def ingest(paths: tuple[Path, ...], name: str | None, tags: tuple[str, ...], again: bool, one_run: bool,
           data_dir: Path | None) -> None:
    """Ingest trace files, folders or archives as one run; prints the run id. A folder of unrelated traces
    becomes one run per step and folder (ranks of one step together), as `serve --watch` groups them; each id
    is printed. Files already ingested (the same bytes) are not ingested again: their run's id is printed
    (--again makes a new run)."""
    from explorer.native.memory import as_ingest_process

    as_ingest_process()  # this process exists to ingest (explorer.native.memory): before the ingest's imports
    from explorer.runs.watch import plan_runs

    # an ingest bug's traceback goes to bugs/<run>.txt (its error line says so), not to the terminal
    logging.getLogger("explorer.runs.ingest").addHandler(logging.NullHandler())
    store = _store(data_dir, create=True)
    plan = None if one_run or not all(p.exists() for p in paths) else plan_runs(list(paths))
    if plan is None:
        if not _ingest_run(store, list(paths), name, tags, again):
            sys.exit(2)
        return
    console.print(f"{paths[0]} holds {len(plan)} unrelated captures: ingesting them as {len(plan)} runs "
                  "(the traces of one step in one folder together; --one-run makes one run)",
                  highlight=False, markup=False)
    failed = 0
    for planned in plan:
        console.print(f"- {planned.name}: {', '.join(p.name for p in planned.paths)}", highlight=False, markup=False)
        failed += not _ingest_run(store, list(planned.paths), f"{name} ({planned.name})" if name else planned.name,
                                  tags, again)
    if failed:
        console.print(f"error: {failed} of {len(plan)} runs failed (each said why above)", markup=False,
                      highlight=False)
        sys.exit(2)


def _ingest_run(store: RunStore, paths: list[Path], name: str | None, tags: tuple[str, ...], again: bool) -> bool:
    """Ingest `paths` as one run with a progress bar, or reuse the identical ready run; prints its id, or the
    error (and returns False)."""
    from explorer.ingest.limits import IngestLimits
    from explorer.runs.ingest import ingest_paths
    from explorer.runs.records import find_identical

    existing = None if again or not all(p.exists() for p in paths) else find_identical(store, paths)
    if existing is not None:
        console.print(f"already ingested: run {existing.id} ({existing.name}) holds these files; "
                      "--again makes a new run", highlight=False, markup=False)
        if tags:
            store.catalog.set_tags(existing.id, sorted({*existing.tags, *tags}))
        out.print(existing.id)
        return True
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("ingesting", total=1.0)

        def progress(fraction: float, what: str) -> None:
            bar.update(task, completed=fraction, description=what[:60])

        try:
            with terminate_as_interrupt():
                rec = ingest_paths(store, paths, name, progress=progress,
                                   limits=IngestLimits.from_settings(_settings(None)))
        except ExplorerError as exc:
            bar.stop()
            console.print(Text("error:", style="red"), exc.message, highlight=False)
            return False
        except KeyboardInterrupt:
            bar.stop()
            console.print("error: interrupted; the run is marked failed", markup=False, highlight=False)
            sys.exit(130)
    if tags:
        store.catalog.set_tags(rec.id, list(tags))
    s = rec.summary
    console.print(f"ingested {s.slices:,} slices on {s.tracks} tracks, span {fmt_ns(s.span_ns)}, "
                  f"{s.warning_count} warnings", highlight=False)
    for w in s.warnings[:10]:
        console.print(f"  warning: {w.count} x {w.message}", highlight=False, markup=False)
    out.print(rec.id, highlight=False)
    return True


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a job scheduler, `kill`) unwinds like Ctrl-C, so the ingest marks its run failed."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_row(rec: RunRecord) -> dict[str, Any]:
    s = rec.summary
    return {
        "id": rec.id, "name": rec.name, "status": rec.status, "message": rec.message, "tags": rec.tags,
        "span_ns": s.span_ns, "slices": s.slices, "slices_per_lane": s.slices_per_lane, "created_at": rec.created_at,
    }


def runs_table_lanes() -> tuple[str, ...]:
    """The lanes whose slice counts the `runs` table shows."""
    from explorer.model.lanes import Lane

    return (Lane.FRAMEWORK, Lane.RUNTIME, Lane.HARDWARE)


@main.command()
@format_options
@store_options
def runs(fmt: str, data_dir: Path | None) -> None:
    """List runs: id, name, status, span, slices per lane (and, on stderr, which data folder was read)."""
    folder = _data_dir(data_dir).resolve()
    if not folder.is_dir():  # do not create one just to list it
        console.print(_no_folder(folder), soft_wrap=True)
        if fmt == "json":
            out.print_json("[]")
        return
    store = _store(data_dir)
    records, _ = store.catalog.list(limit=10000)
    console.print(f"{len(records)} run{'' if len(records) == 1 else 's'} in {folder}", highlight=False, markup=False,
                  soft_wrap=True)
    rows = [run_row(r) for r in records]
    emit(out, fmt, rows, [Column("id", lambda r: r["id"]), Column("name", lambda r: r["name"], name=True),
                          Column("status", lambda r: r["status"]), Column("span", lambda r: fmt_ns(r["span_ns"])),
                          *(Column(k, _lane_count(k)) for k in runs_table_lanes()),
                          Column("total", lambda r: f"{r['slices']:,}")])


def _lane_count(lane: str) -> Callable[[dict[str, Any]], str]:
    return lambda r: f"{r['slices_per_lane'].get(lane, 0):,}"


OP_SORTS = ("device_total_ns", "self_device_ns", "cpu_total_ns", "self_cpu_ns", "calls", "name", "cpu_avg_ns")
OP_VIEW_CHOICES = ("operators", "python", "all")  # explorer.store.queries.OP_VIEWS (a test pins them equal)


OP_COLUMNS = (Column("calls", lambda r: f"{r['calls']:,}"), Column("CPU total", lambda r: fmt_ns(r["cpu_total_ns"])),
              Column("self CPU", lambda r: fmt_ns(r["self_cpu_ns"])), Column("CPU avg", lambda r: fmt_ns(r["cpu_avg_ns"])),
              Column("device total", lambda r: fmt_ns(r["device_total_ns"])),
              Column("self device", lambda r: fmt_ns(r["self_device_ns"])),
              Column("device %", lambda r: f"{r['device_pct']:.1f}%"))


def _run_id(store: RunStore, ref: str) -> str:
    """The id of the run `ref` names (explorer.runs.refs.resolve_cli_ref: id, exact name, tag:NAME@latest);
    an error names the data folder that was read."""
    from explorer.runs.refs import resolve_cli_ref

    try:
        return resolve_cli_ref(store, ref).id
    except ExplorerError as exc:
        console.print(f"error: {exc.message}")
        sys.exit(2)


RUN_HELP = "RUN: a run id, a run's name, or tag:NAME@latest"


EMPTY_OPS_VIEW = {  # what an empty view means, and how to fill it
    "python": "no Python frames in this run: profile with torch.profiler.profile(with_stack=True) to record them",
    "operators": "no ops in this run: it holds no framework op (cpu_op, user annotation) and no launch site",
}


def _sort_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`col`, `-col` (descending) or `+col` (ascending), as the API's `sort=` takes it."""
    if value is not None and value.lstrip("-+") not in OP_SORTS:
        raise click.BadParameter(f"{value!r}: sort by one of {', '.join(OP_SORTS)}, as col, -col or +col")
    return value


@main.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@click.option("--view", type=click.Choice(OP_VIEW_CHOICES), default="operators", show_default=True,
              help="operators: ATen ops and annotations, and the Python frames or runtime calls that launched device "
                   "work outside any op; python: with_stack frames; all: key_averages()")
@click.option("--sort", default=None, callback=_sort_option, metavar="[-|+]COLUMN",
              help="Column to sort by, as the API takes it: -col descending, +col ascending; a bare column sorts "
                   "descending, except name (ascending). Columns: " + ", ".join(OP_SORTS) + " [default: "
                   "-self_device_ns, or -self_cpu_ns without device time; -cpu_total_ns for --view python]")
@click.option("--limit", type=int, default=30, show_default=True)
@click.option("--by-shape", is_flag=True, help="Group by input shapes as well as name")
@click.option("--by-module", is_flag=True, help="Group by enclosing nn.Module path (with_modules traces)")
@format_options
@store_options
def ops(run_id: str, view: str, sort: str | None, limit: int, by_shape: bool, by_module: bool, fmt: str,
        data_dir: Path | None) -> None:
    """The op table of a run (like torch.profiler key_averages())."""
    from explorer.store.queries import load_ops, run_device_total_ns
    from explorer.views.rates import add_op_work

    store = _store(data_dir)
    run_id = _run_id(store, run_id)
    try:
        every = load_ops(store, run_id, sort=sort, limit=None, by_shape=by_shape, view=view, by_module=by_module)
        rec = store.require_ready(run_id)  # issue 37: each row's `work`, as the API twin's rows have it
        add_op_work(store, rec, every, by_shape, run_device_total_ns(rec))
    except ExplorerError as exc:
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    rows = every[:max(0, limit)]
    if fmt == "json" and not by_shape:  # without by_shape the per-name table's input_shapes is always "": not shown
        rows = [cast(Any, {k: v for k, v in r.items() if k != "input_shapes"}) for r in rows]
    # the operators view also lists the Python frames and runtime calls that launched device work outside any op
    kinds = any(r["kind"] != "operator" for r in rows) and view == "operators"
    emit(out, fmt, rows, [*([Column("module", lambda r: r["module"], name=True)] if by_module else []),
                          Column("name", lambda r: r["name"], name=True),
                          *([Column("kind", lambda r: r["kind"])] if kinds else []),
                          *([Column("input shapes", lambda r: r["input_shapes"], name=True)] if by_shape else []),
                          *OP_COLUMNS])
    if not every:
        console.print(EMPTY_OPS_VIEW.get(view, "no ops in this run"), soft_wrap=True)
    elif len(rows) < len(every):
        console.print(f"showing {len(rows)} of {len(every)} rows (--limit N shows more)")


@main.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write (default report-RUN.html)")
@store_options
def report(run_id: str, output: Path | None, data_dir: Path | None) -> None:
    """Write one self-contained HTML report of a run (opens offline, without the server)."""
    from explorer.report.html import write_report
    from explorer.runs.run import Run

    store = _store(data_dir)
    run_id = _run_id(store, run_id)
    target = output or Path(f"report-{run_id}.html")
    try:
        size = write_report(Run.of(store, run_id), target)
    except ExplorerError as exc:
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    console.print(f"wrote {target} ({size / 1e6:.1f} MB)", highlight=False, markup=False)


# ---- check: the CI regression gate ---------------------------------------------------------------

# explorer.analysis.check.DEFAULT_MAX_REGRESSION, written here for --help without importing the gate (a test pins
# them equal)
CHECK_DEFAULT_MAX_REGRESSION = "5%"
CHECK_OK, CHECK_REGRESSION, CHECK_USAGE = 0, 1, 2  # exit codes of `check` (docs/cli.md, "CI regression gate")
VERDICT_MARK = {"regression": "❌", "improvement": "✅", "ok": "✓"}


@main.command()
@click.argument("baseline")
@click.argument("candidate")
@click.option("--metric", "metrics", multiple=True, metavar="METRIC",
              help="device_total | cpu_total | step_time | op:NAME | kernel:NAME (repeatable) "
                   "[default: device_total (cpu_total without device time), and step_time when both have steps]")
@click.option("--max-regression", default=None,
              help="Largest allowed growth of a metric: a percentage (5%) or a fraction (0.05) "
                   f"[default: {CHECK_DEFAULT_MAX_REGRESSION}]")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (the /api/check object)")
@click.option("--markdown", is_flag=True, help="Print a Markdown summary for a PR comment")
@store_options
def check(baseline: str, candidate: str, metrics: tuple[str, ...], max_regression: str | None, as_json: bool,
          markdown: bool, data_dir: Path | None) -> None:
    """Check CANDIDATE against BASELINE; exit 1 when a metric regressed beyond the threshold.

    Each is a run id, tag:NAME@latest (tag:NAME@1: the one before), or a trace file or folder (ingested
    unless a run holds exactly these files). Exit codes: 0 no regression, 1 regression, 2 bad usage or
    reference."""
    from explorer.analysis.check import DEFAULT_MAX_REGRESSION  # here: `ingest` need not import the gate
    from explorer.views.check import compute_run_check

    store = _store(data_dir, create=True)  # trace paths given as refs are ingested into it
    try:
        refs = [_check_ref(store, ref) for ref in (baseline, candidate)]
        result = compute_run_check(store, refs[0], refs[1], metrics, max_regression or DEFAULT_MAX_REGRESSION)
    except ExplorerError as exc:  # names from traces: neither markup nor :emoji: codes
        console.print(f"error: {exc.message}", markup=False, emoji=False, highlight=False)
        sys.exit(CHECK_USAGE)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif markdown:
        click.echo(check_markdown(result), nl=False)
    else:
        out.print(_check_table(result))
        console.print(_check_verdict(result), markup=False, emoji=False, highlight=False)
    sys.exit(CHECK_OK if result["passed"] else CHECK_REGRESSION)


def _check_ref(store: RunStore, ref: str) -> str:
    """A path on disk becomes the id of the run holding it (ingested when none does); other refs are resolved as
    every command resolves them (_run_id: id, exact name, tag:NAME@latest)."""
    path = Path(ref)
    if ref.startswith("tag:") or not path.exists():
        return _run_id(store, ref)
    from explorer.runs.ingest import ingest_or_find

    rec = ingest_or_find(store, [path])
    console.print(f"{ref}: run {rec.id}", markup=False, emoji=False, highlight=False)
    return rec.id


def fmt_bytes(n: int) -> str:
    """Bytes in binary units (check's peak_memory rows)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _pct(value: float | None) -> str:
    return "new" if value is None else f"{value:+.1f}%"


def _check_cells(row: Any) -> list[str]:
    fmt = fmt_bytes if row.get("unit") == "bytes" else fmt_ns
    return [row["metric"], fmt(row["baseline_ns"]), fmt(row["candidate_ns"]),
            ("+" if row["delta_ns"] > 0 else "") + fmt(row["delta_ns"]),
            _pct(row["pct_change"]) if row["baseline_ns"] or row["candidate_ns"] else "0.0%", row["verdict"]]


def _check_table(result: Any) -> Table:
    table = Table("metric", "baseline", "candidate", "Δ", "Δ %", "verdict",
                  title=Text(f"{result['candidate']['name']} vs {result['baseline']['name']}"))
    for row in result["rows"]:
        table.add_row(*(Text(c) for c in _check_cells(row)))
    return table


def _check_verdict(result: Any) -> str:
    limit = f"{result['max_regression_pct']:g}%"
    if result["passed"]:
        return f"ok: no metric regressed by more than {limit}"
    return f"REGRESSION: {result['regressions']} metric(s) regressed by more than {limit}"


def _md(text: str) -> str:
    """Trace names in a Markdown table cell: pipes, backticks and markup characters escaped."""
    return "".join("\\" + c if c in "\\`*_[]<>|#" else c for c in text).replace("\n", " ")


def check_markdown(result: Any) -> str:
    """The check as a Markdown summary, ready for a PR comment."""
    head = "❌ regression" if not result["passed"] else "✅ no regression"
    b, c = result["baseline"], result["candidate"]
    lines = [f"### Trace Explorer check: {head}", "",
             f"Candidate **{_md(c['name'])}** (`{c['id']}`) against baseline **{_md(b['name'])}** (`{b['id']}`), "
             f"max regression {result['max_regression_pct']:g}%.", "",
             "| metric | baseline | candidate | Δ | Δ % | verdict |", "|---|---:|---:|---:|---:|---|"]
    for row in result["rows"]:
        cells = _check_cells(row)
        cells[0], cells[-1] = _md(cells[0]), f"{VERDICT_MARK[row['verdict']]} {row['verdict']}"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@main.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(("perfetto-json",)), default="perfetto-json", show_default=True,
              help="perfetto-json: a Chrome JSON trace that ui.perfetto.dev and trace_processor load")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (default RUN.perfetto.json)")
@store_options
def export(run_id: str, fmt: str, output: Path | None, data_dir: Path | None) -> None:
    """Export a run (all lanes, counters, flows, Neuron device tracks) for another tool."""
    from explorer.report.perfetto import check_format, write_perfetto_json
    from explorer.runs.run import load_device_timeline

    store = _store(data_dir)
    run_id = _run_id(store, run_id)
    target = output or Path(f"{run_id}.perfetto.json")
    try:
        check_format(fmt)
        store.require_ready(run_id)
        with target.open("wb") as fh:
            size = write_perfetto_json(store, run_id, fh, load_device_timeline(store, run_id))
    except ExplorerError as exc:
        target.unlink(missing_ok=True)
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    except BaseException:  # interrupted or failed mid-stream: no half-written file is left behind
        target.unlink(missing_ok=True)
        raise
    console.print(f"wrote {target} ({size / 1e6:.1f} MB); open it at ui.perfetto.dev (Open trace file)",
                  highlight=False, markup=False)


@main.command()
@store_options
def gc(data_dir: Path | None) -> None:
    """Remove from the run storage every file no catalog record references: runs deleted or failed, and
    publications of a run that were interrupted (a server sweeps the first kind whenever it starts)."""
    try:
        removed = _store(data_dir).sweep()
    except ExplorerError as exc:  # the storage does not answer
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    for key in removed:
        out.print(f"removed {key}", highlight=False, markup=False)
    out.print(f"{len(removed)} unreferenced folder(s) removed", highlight=False, markup=False)


if __name__ == "__main__":
    main()


@main.group()
def db() -> None:
    """The catalog database's schema."""


@db.command("upgrade")
@store_options
def db_upgrade(data_dir: Path | None) -> None:
    """Bring the catalog's schema to this version's revision: on a team server, once, before starting
    the new version's processes (the embedded SQLite catalog is upgraded whenever it is opened)."""
    settings = _settings(data_dir)
    from explorer.store.catalog.db import make_engine, shown, sqlite_url, upgrade

    url = settings.catalog_url or sqlite_url(settings.data_dir / "catalog.sqlite")
    try:
        engine = make_engine(url)
        before, after = upgrade(engine)
    except ExplorerError as exc:
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    where = shown(engine.url)
    postgres = engine.dialect.name == "postgresql"
    engine.dispose()
    if before == after:
        out.print(f"catalog {where} is at revision {after}: nothing to do", highlight=False, markup=False)
    else:
        out.print(f"catalog {where} upgraded from revision {before or '(none)'} to {after}", highlight=False,
                  markup=False)
    if postgres:  # the ingest queue (ingest_queue=postgres) lives in the catalog's database
        from explorer.runs.jobs.queue import apply_queue_schema

        applied = apply_queue_schema(settings.model_copy(update={"catalog_url": url}))
        out.print(f"job queue schema {'applied' if applied else 'present: nothing to do'}", highlight=False,
                  markup=False)


@main.command()
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Jobs this process runs at once (default $EXPLORER_WORKER_CONCURRENCY, else 1)")
@store_options
def worker(concurrency: int | None, data_dir: Path | None) -> None:
    """Run ingest jobs from the job queue in the catalog's PostgreSQL database (serve --ingest-queue postgres)
    until stopped (SIGTERM or Ctrl-C: running jobs finish first). Any number, on any machines that share the
    data folder; each logs the jobs it takes."""
    from explorer.native.memory import as_ingest_process

    try:
        require_extra("procrastinate", "trace-explorer worker")
    except ExplorerError as exc:
        console.print(f"error: {exc.message}")
        sys.exit(2)
    as_ingest_process()  # this process exists to ingest (explorer.native.memory): before the ingest's imports
    from explorer.runs.jobs.worker import run_worker

    settings = _settings(data_dir)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_worker(settings, concurrency or settings.worker_concurrency)
    except ExplorerError as exc:
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)


@main.command(epilog=RUN_HELP)
@click.argument("run_id", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON (the /api/runs/{id}/advice object)")
@click.option("--markdown", is_flag=True, help="Print Markdown for a pull-request comment")
@store_options
def advise(run_id: str, as_json: bool, markdown: bool, data_dir: Path | None) -> None:
    """What to fix first in a run: the advisor's findings, ranked by expected saving (docs/advice.md)."""
    from explorer.runs.run import Run
    from explorer.views.advice import advice_markdown, fact_text, run_advice, saving_text

    store = _store(data_dir)
    run_id = _run_id(store, run_id)
    try:
        advice = run_advice(Run.of(store, run_id))
    except ExplorerError as exc:
        console.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(2)
    if as_json:
        out.print_json(json.dumps(advice))
        return
    if markdown:
        out.print(advice_markdown(advice, store.get(run_id).name), end="")
        return
    if not advice["findings"]:
        out.print("no finding: none of the rules fired on this run")
    for n, f in enumerate(advice["findings"], 1):
        out.print(f"{n}. {f['title']}  [saves {saving_text(f, advice['span_ns'])}; {f['confidence']} confidence, "
                  f"{f['effort']} effort]")
        out.print("   " + "; ".join(f"{x['label']} {fact_text(x['value'], x['unit'])}" for x in f["facts"]))
        out.print(f"   fix: {f['fix']}")
        out.print(f"   saving = {f['formula']}")
