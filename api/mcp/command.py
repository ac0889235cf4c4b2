"""`trace-explorer mcp`: the agent tools over stdio for a local agent (Claude Code, Cursor, VS Code), on the data
folder the other commands use. Nothing may print to stdout here but the protocol: logs go to stderr."""

from __future__ import annotations

from pathlib import Path

import click

from explorer.cli import store_options
from explorer.errors import ExplorerError, require_extra


@click.command("mcp")
@store_options
def mcp_command(data_dir: Path | None) -> None:
    """Serve the agent tools (MCP, stdio) over this data folder's runs: list, summary, ops, kernels, steps, gaps,
    timeline, chain, search, SQL, compare, check, ranks, device; ingest a path. docs/agents.md has the guide."""
    try:
        require_extra("mcp", "trace-explorer mcp", extra="mcp")
    except ExplorerError as exc:
        raise click.ClickException(exc.message) from None
    from api.app import create_app
    from api.mcp.registry import build_server
    from explorer.cli import _settings

    try:
        app = create_app(_settings(data_dir))
    except ExplorerError as exc:  # the catalog does not answer or needs `db upgrade`: one line, no traceback
        raise click.ClickException(exc.message) from None
    state = app.state.explorer
    try:
        build_server(state, local=True).run("stdio")
    finally:
        state.ingester.shutdown()
        state.store.catalog.close()
