"""The answers of the Neuron Explorer-compatible query API (`/api/v1/db/{name}/_search`): a run's (or a device
profile's) tables queried, described and listed as Neuron Explorer's API server answers (explorer/store/neuron_db.py
holds the mapping)."""

from __future__ import annotations

from typing import Any

from explorer.config import Settings
from explorer.store.neuron_db import db_names, query_db, require_table, resolve_db, table_rows, table_schema
from explorer.store.runs import RunStore
from explorer.store.sql import MAX_SQL_CHARS

__all__ = ["MAX_SQL_CHARS", "list_tables", "query_tables", "table_fields"]


def query_tables(store: RunStore, settings: Settings, name: str, table: str, query: str) -> dict[str, Any]:
    """`databaseExplorerQuery`: one read-only SELECT over the database `name` names."""
    db = resolve_db(store, name)
    if table:
        require_table(db, table)
    res = query_db(store, db, query, settings.sql_timeout_s, settings.sql_max_rows)
    return {"tableName": table, "columns": res.columns,
            "data": [dict(zip(res.columns, row, strict=True)) for row in res.rows], "rowCount": len(res.rows),
            "truncated": res.truncated, "elapsedMs": res.elapsed_ms}


def table_fields(store: RunStore, name: str, table: str) -> dict[str, Any]:
    """`tableSchema`: a table's fields."""
    return {"tableName": table, "fields": table_schema(resolve_db(store, name), table)}


def list_tables(store: RunStore, name: str) -> dict[str, Any]:
    """`listDbFiles`: the database's tables with their row counts, and the databases of its run."""
    db = resolve_db(store, name)
    return {"files": [{"tableName": t, "file": f"{t}.parquet", "rows": table_rows(store, db, t)}
                      for t in db.table_names()], "databases": db_names(store, db.run)}
