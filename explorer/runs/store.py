"""The data folder as the layers above this one name it: the store, a run's catalog record, a share link's record
and the catalog. They are defined in explorer.store; the API and the entry points reach them through the run
layer, which owns what a run is."""

from __future__ import annotations

from explorer.store.catalog.catalog import Catalog, RunRecord, ShareRecord
from explorer.store.runs import RunStore

__all__ = ["Catalog", "RunRecord", "RunStore", "ShareRecord"]
