"""The console script's entry point: what must happen before the CLI's imports (Arrow's memory pool for a
command that ingests or serves, an ingest process's refused modules), then the CLI (api/cli.py). This
module imports nothing heavy, and nothing happens on import."""

from __future__ import annotations

import gc
import sys

from explorer.native.memory import as_ingest_process, ingest_environment

INGEST_COMMANDS = frozenset({"ingest", "worker"})
# long-running processes that hold runs' tables: Arrow's system pool too, whose freed pages go back (a server's
# memo and table cache trim the heap: explorer.native.heap); mimalloc kept what a table's read once used
SERVER_COMMANDS = frozenset({"serve", "demo"})


def main() -> None:
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
    if "--help" in sys.argv[1:]:  # only click's help text: nothing to prepare, nothing heavy to load
        command = ""
    if command in INGEST_COMMANDS | SERVER_COMMANDS:
        ingest_environment()
    if command in INGEST_COMMANDS:
        as_ingest_process()
    from api.cli import main as cli

    try:
        cli()
    finally:
        # The command's work is done: spare the interpreter's exit its collections over every object the
        # imports made (~96k; finalization traverses them several times): `ingest rank0.json` exited 0.33-0.51 s
        # after its run was written, 0.07-0.09 s with them frozen. Cyclic garbage left at exit is not finalized
        # then; Python does not promise that it is.
        gc.freeze()
