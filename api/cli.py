"""Console entry point: the core CLI (explorer.cli) plus the commands that need the web server.

Kept in api/ so that explorer/ never imports api/ (CONTRIBUTING.md, "Layers": dependencies point one way).
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api import client_commands
from api.mcp.command import mcp_command
from explorer import cli_tables
from explorer.cli import STORAGE_HELP, main
from explorer.errors import ExplorerError

if TYPE_CHECKING:
    from explorer.runs.store import RunRecord, RunStore

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tunnel_hint(port: int, root_path: str) -> list[str]:
    """The lines `serve` prints: the local URL and the exact ssh command to reach it from a laptop."""
    url = f"http://127.0.0.1:{port}{root_path.rstrip('/')}/"
    return [f"Trace Explorer serving at {url}",
            f"From your laptop: ssh -L {port}:localhost:{port} {socket.gethostname()}   then open {url}"]


def port_is_free(host: str, port: int) -> bool:
    """Whether `port` can be bound on `host` now (as uvicorn will bind it, SO_REUSEADDR set)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def next_free_port(host: str, port: int, tries: int = 50) -> int | None:
    return next((p for p in range(port + 1, min(port + 1 + tries, 65536)) if port_is_free(host, p)), None)


def check_port(host: str, port: int) -> None:
    """A busy port is a usage error naming the next free one, before anything is printed or ingested."""
    if port_is_free(host, port):
        return
    free = next_free_port(host, port)
    hint = f"; the next free port is {free}: trace-explorer serve --port {free}" if free else ""
    raise click.UsageError(f"port {port} on {host} is in use (another explorer or server?){hint}")


def open_paths(store: RunStore, paths: list[Path]) -> list[RunRecord]:
    """The runs holding `paths`, as `ingest` makes them (a folder of unrelated traces is one run per step and
    folder): an identical earlier run is reused and said so."""
    from explorer.runs.ingest import ingest_paths
    from explorer.runs.records import find_identical
    from explorer.runs.watch import plan_runs

    plan = plan_runs(paths)
    groups = [(list(p.paths), p.name) for p in plan] if plan else [(paths, None)]
    if plan:
        click.echo(f"{paths[0]} holds {len(plan)} unrelated captures: one run each")
    opened = []
    for files, name in groups:
        existing = find_identical(store, files)  # hashed only when a run's files have the same sizes
        rec = existing or ingest_paths(store, files, name)
        names = ", ".join(str(p) for p in files)
        if existing is not None:
            click.echo(f"{names}: already ingested as run {rec.id} ({rec.name}); opening it")
        else:
            click.echo(f"{names}: ingested as run {rec.id} ({rec.name})")
        opened.append(rec)
    return opened


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1; others need a token)")
@click.option("--port", type=int, default=None, help="Port (default 8000)")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None, help="Data folder")
@click.option("--catalog-url", default=None,
              help="Catalog database, e.g. postgresql://user@host:5432/db (default: catalog.sqlite in the data folder)")
@click.option("--storage", default=None, help=STORAGE_HELP)
@click.option("--root-path", default=None, help="Path prefix when served behind a reverse proxy")
@click.option("--ingest-queue", type=click.Choice(("inline", "postgres")), default=None,
              help="inline: ingest uploads in this process (default); postgres: enqueue them for `trace-explorer "
              "worker` processes on the catalog's PostgreSQL database")
@click.option("--token", default=None, help="Access token (or $EXPLORER_TOKEN); required off loopback")
@click.option("--allowed-hosts", multiple=True, help="A host name the server answers to besides loopback (repeatable)")
@click.option("--forwarded-allow-ips", default=None, help="Proxies trusted for X-Forwarded-* (default 127.0.0.1)")
@click.option("--watch", "watch", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Ingest every trace that appears under this folder (repeatable), like a TensorBoard logdir")
@click.option("--source-host", default=None,
              help="SSH host the profiled code lives on: source links open it with VS Code Remote-SSH")
@click.option("--source-map", "source_map", multiple=True, metavar="FROM=TO",
              help="Rewrite profiled path prefix FROM to TO in source links (repeatable)")
@click.option("--source-root", default=None, help="Folder relative frame paths are joined to in source links")
def serve(paths: tuple[Path, ...], host: str | None, port: int | None, data_dir: Path | None, catalog_url: str | None, storage: str | None,
          root_path: str | None, ingest_queue: str | None, token: str | None, allowed_hosts: tuple[str, ...],
          forwarded_allow_ips: str | None,
          watch: tuple[Path, ...], source_host: str | None, source_map: tuple[str, ...], source_root: str | None) -> None:
    """Serve pages, API and static files on one port; with PATHS (a trace file, several files of one run, or a
    capture folder), ingest them first (an identical earlier run is reused) and print that run's address."""
    import uvicorn
    from pydantic import ValidationError

    from api.app import create_app
    from api.connections import uvicorn_options
    from explorer.config import Settings

    given = {"host": host, "port": port, "data_dir": data_dir, "catalog_url": catalog_url, "storage": storage,
             "root_path": root_path, "ingest_queue": ingest_queue, "token": token,
             "allowed_hosts": list(allowed_hosts) or None, "forwarded_allow_ips": forwarded_allow_ips,
             "watch_dirs": list(watch) or None,
             "source_host": source_host, "source_map": list(source_map) or None, "source_root": source_root}
    settings = Settings().model_copy(update={k: v for k, v in given.items() if v is not None})
    try:  # model_copy does not validate: check the source-link options here
        Settings.model_validate(settings.model_dump())
    except ValidationError as exc:
        raise click.UsageError("; ".join(str(e["msg"]) for e in exc.errors())) from None
    if not is_loopback(settings.host) and not settings.token:
        raise click.UsageError(f"refusing to bind {settings.host} (not loopback) without a token: "
                               "pass --token or set EXPLORER_TOKEN")
    check_port(settings.host, settings.port)
    try:
        app = create_app(settings)
        store = app.state.explorer.store
        opened = open_paths(store, list(paths)) if paths else []
    except ExplorerError as exc:  # the catalog does not answer or needs `db upgrade`: one line, no traceback
        raise click.ClickException(exc.message) from None
    count = store.catalog.list(limit=1)[1]
    click.echo(f"Data folder {Path(settings.data_dir).resolve()}: {count} run{'' if count == 1 else 's'}")
    for line in tunnel_hint(settings.port, settings.root_path):
        click.echo(line)
    if any(getattr(route, "path", "") == "/mcp" for route in app.routes):  # the mcp extra is installed
        click.echo(f"Agent tools (MCP, streamable HTTP): {tunnel_hint(settings.port, settings.root_path)[0].split()[-1]}"
                   "mcp   (docs/agents.md)")
    for rec in opened:
        click.echo(f"Run {rec.name}: {tunnel_hint(settings.port, settings.root_path)[0].split()[-1]}runs/{rec.id}")
    for folder in settings.watch_dirs:
        click.echo(f"Watching {folder} for new traces")
    if settings.token:
        click.echo(f"Token required: open {tunnel_hint(settings.port, settings.root_path)[0].split()[-1]}"
                   "?token=<token> once in the browser")
    # the path prefix is the server's to apply (FastAPI's own root_path parameter is deprecated)
    # slow clients and connection counts are bounded by api/connections.py's protocol and uvicorn's own options
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", root_path=settings.root_path,
                proxy_headers=True, forwarded_allow_ips=settings.forwarded_allow_ips, **uvicorn_options(settings))


main.add_command(serve)
# `open PATH`: the same command under the name a new user looks for first (datasette and TensorBoard open what
# they are pointed at); one callback and one set of options, so the two cannot drift apart
main.add_command(click.Command("open", callback=serve.callback, params=serve.params,
                               help="Open traces in the browser: the same as `serve PATH...` (ingest PATH, then serve "
                               "it and print its address and the ssh line).",
                               short_help="Ingest PATH... and serve it (= serve PATH...)"))
main.add_command(client_commands.demo)  # profile RMSNorm variants, ingest, serve the comparison
main.add_command(client_commands.upload)  # send files to a running explorer
main.add_command(mcp_command)  # the agent tools over stdio (api/mcp/)
for table_command in cli_tables.COMMANDS:  # kernels, steps, gaps, ranks: tables, --json, --markdown
    main.add_command(table_command)

__all__ = ["main", "serve"]
