"""Trace Explorer: ingest ML profiler traces, store them as Parquet, analyse and serve them.

`from explorer import open_run` is the notebook API (explorer.notebook); it is looked up on first use,
by name, so `import explorer` stays light and this base module imports nothing above it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"  # the one version: pyproject.toml reads it ([tool.hatch.version]), so do /-/version and --version

LAZY_EXPORTS = {"open_run": "explorer.notebook", "Run": "explorer.notebook"}
__all__ = ["__version__", *LAZY_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in LAZY_EXPORTS:
        return getattr(import_module(LAZY_EXPORTS[name]), name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")
