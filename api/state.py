"""Server state held by the app: settings, the store, the ingester and the runs (RunCache: what is derived from
each run, built once and kept in an LRU sized by settings)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.config import Settings
from explorer.runs.ingesters import Ingester
from explorer.runs.run import RunCache
from explorer.runs.store import RunStore

__all__ = ["AppState"]


@dataclass
class AppState:
    settings: Settings
    store: RunStore
    ingester: Ingester  # inline (this server's processes) or queued (ingest_queue=postgres)
    runs: RunCache
