"""Console entry point: the core CLI (explorer.cli) plus the commands that need the web server.

Kept in api/ so that explorer/ never imports api/ (see STYLE.md: dependencies point one way).
"""

from __future__ import annotations

from explorer.cli import main

# Commands that start or talk to the server register here, one line each:
# main.add_command(serve)

__all__ = ["main"]
