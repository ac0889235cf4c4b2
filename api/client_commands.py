"""CLI commands around a server: `demo` (profile, ingest, then serve) and `upload` (send files to one).

They live in api/ because `demo` ends by starting the server; the work itself is in explorer.demo and
explorer.upload_client, and this module only prints and shows progress.
"""

from __future__ import annotations

import shlex
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from explorer.cli import data_dir_option, fmt_ns
from explorer.errors import ExplorerError

if TYPE_CHECKING:
    from explorer.config import Settings

console = Console(stderr=True)
out = Console()


def _fail(message: str) -> None:
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False)  # messages hold [brackets]
    sys.exit(2)


def _settings(**overrides: object) -> Settings:
    """Settings (environment and defaults) with the options the user gave on the command line."""
    from explorer.config import Settings

    return Settings().model_copy(update={k: v for k, v in overrides.items() if v is not None})


def serve_command(settings: Settings) -> str:
    """The `trace-explorer serve` line that serves what the demo just made, at the URL it printed."""
    parts = ["trace-explorer", "serve", "--port", str(settings.port), "--data-dir",
             shlex.quote(str(settings.data_dir.resolve()))]
    from explorer.config import Settings

    if settings.host != Settings.model_fields["host"].default:
        parts += ["--host", settings.host]
    if settings.root_path:
        parts += ["--root-path", shlex.quote(settings.root_path)]
    return " ".join(parts)


@click.command()
@click.option("--device", default=None, help="cpu, cuda, cuda:1, ... (default: the accelerator present, else cpu)")
@click.option("--no-compile", is_flag=True, help="Skip the torch.compile variant")
@click.option("--compile-timeout", type=float, default=300.0, show_default=True,
              help="Seconds torch.compile may take before the demo continues without it")
@click.option("--no-serve", is_flag=True, help="Ingest the runs, print the compare URL and exit")
@click.option("--host", default=None, help="Address to serve on (default 127.0.0.1)")
@click.option("--port", type=int, default=None, help="Port to serve on (default 8000)")
@data_dir_option
@click.pass_context
def demo(ctx: click.Context, device: str | None, no_compile: bool, compile_timeout: float, no_serve: bool,
         host: str | None, port: int | None, data_dir: Path | None) -> None:
    """Profile three RMSNorm implementations, ingest them as runs and serve their comparison.

    Naive (six PyTorch ops), fused torch.rms_norm and torch.compile of the naive one, each traced with
    torch.profiler on the accelerator present (CPU otherwise). Needs the [torch] extra.
    """
    from explorer.demo import run_demo, summarize
    from explorer.model.demo import ACTIVE_STEPS
    from explorer.runs.store import RunStore

    settings = _settings(data_dir=data_dir, host=host, port=port)
    store = RunStore.from_settings(settings)
    console.print("[bold]Trace Explorer demo[/bold]: the same RMSNorm three ways, each profiled for "
                  f"{ACTIVE_STEPS} steps with torch.profiler, then compared op by op.", highlight=False)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("starting (importing torch)", total=1.0)
        try:
            result = run_demo(
                store, device=device, use_compile=not no_compile, compile_timeout_s=compile_timeout,
                notify=lambda msg: bar.console.print(f"  {msg}", highlight=False, markup=False),
                progress=lambda f, what: bar.update(task, completed=f, description=what[:70]))
        except ExplorerError as exc:
            bar.stop()
            _fail(exc.message)
            return
    table = Table("run", "time per step", "vs naive", title="What each version costs", title_justify="left")
    for row in summarize(store, result):
        change = "baseline" if row.pct_vs_baseline is None else f"{row.pct_vs_baseline:+.1f}%"
        table.add_row(row.name, f"{fmt_ns(row.per_step_ns)} ({row.clock})", change)
    console.print(table)
    base = f"http://{'localhost' if settings.host in ('127.0.0.1', 'localhost', '::1', '0.0.0.0', '::') else settings.host}" \
           f":{settings.port}{settings.root_path}"
    console.print("Open the comparison (lower time is better; click a run name for its timeline):",
                  highlight=False)
    out.print(base + result.compare_path, highlight=False, soft_wrap=True)
    if no_serve:  # the link is for the server the user starts next: say which one, exactly
        console.print(f"The link is for a server on port {settings.port} reading {settings.data_dir.resolve()}; "
                      f"start it with:\n    {serve_command(settings)}", highlight=False, markup=False, soft_wrap=True)
        return
    console.print(f"On a remote box, first run on your laptop: ssh -L {settings.port}:localhost:{settings.port} "
                  f"{socket.gethostname()}  — then open the link above. Starting the server (Ctrl+C stops it).",
                  highlight=False, markup=False)
    root = ctx.find_root().command
    serve = root.get_command(ctx, "serve") if isinstance(root, click.Group) else None
    if serve is None:
        _fail("this installation has no `serve` command; start the server another way")
        return
    params = {p.name for p in serve.params}
    wanted = {"host": settings.host, "port": settings.port, "data_dir": settings.data_dir}
    ctx.invoke(serve, **{k: v for k, v in wanted.items() if k in params})


@click.command()
@click.argument("server")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--name", default=None, help="Run name (default: from the first file)")
@click.option("--tag", "tags", multiple=True, help="Tag the run (repeatable)")
@click.option("--token", default=None, help="Server token (default $EXPLORER_TOKEN); needed when the server has one")
@click.option("--no-wait", is_flag=True, help="Return once uploaded, without waiting for ingest")
@click.option("--timeout", type=float, default=3600.0, show_default=True, help="Seconds to wait for ingest")
def upload(server: str, paths: tuple[Path, ...], name: str | None, tags: tuple[str, ...], token: str | None,
           no_wait: bool, timeout: float) -> None:
    """Send files, folders or archives to a running explorer at SERVER (http://host:port) as one run.

    Shows upload progress, waits for the ingest and prints the run URL.
    """
    from explorer.upload_client import upload_run

    token = token or _settings().token
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        sending = bar.add_task("uploading", total=None, detail="")
        ingesting: list[TaskID] = []
        started = time.monotonic()

        def on_bytes(sent: int, total: int) -> None:
            rate = sent / max(time.monotonic() - started, 1e-3)
            bar.update(sending, completed=sent, total=total,
                       detail=f"{sent / 1e6:,.1f} / {total / 1e6:,.1f} MB  {rate / 1e6:,.1f} MB/s")

        def on_ingest(fraction: float, what: str) -> None:
            if not ingesting:
                bar.update(sending, description="uploaded")
                ingesting.append(bar.add_task("ingesting", total=1.0, detail=""))
            bar.update(ingesting[0], completed=fraction, detail=what[:50])

        try:
            result = upload_run(server, list(paths), name=name, tags=list(tags), token=token, on_bytes=on_bytes,
                                on_ingest=on_ingest, wait=not no_wait, timeout_s=timeout)
        except ExplorerError as exc:
            bar.stop()
            _fail(exc.message)
            return
    if result.duplicate_of:
        console.print(f"already uploaded as run {result.duplicate_of}", highlight=False)
    console.print(f"run {result.run_id}: {result.status}", highlight=False)
    out.print(result.url, highlight=False, soft_wrap=True)
