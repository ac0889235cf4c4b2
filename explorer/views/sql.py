"""The SQL page (`/runs/{id}/sql`): the editor and the schema beside it."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.config import Settings
from explorer.model.shapes import (
    RunJson,
    SqlSchema,
)
from explorer.runs.run import Run
from explorer.store.sql import (
    MAX_SQL_CHARS,
    SQL_EXAMPLES,
    SQL_TABLES,
    SqlResult,
    iter_sql_csv,
    load_sql_schema,
    run_sql,
)
from explorer.views.links import run_json


@dataclass
class SqlPage:
    """`/runs/{id}/sql?q=...`: the editor, the schema beside it; twin `/api/runs/{id}/sql/schema`. The page
    runs `q` itself (POST /api/runs/{id}/sql) and then points its twin link at the result,
    `/api/runs/{id}/sql?q=...`."""

    run: RunJson
    schema: SqlSchema
    q: str
    twin: str = ""


def build_sql_page(run: Run, q: str = "") -> SqlPage:
    return SqlPage(run_json(run.record), load_sql_schema(run.store, run.id), q, f"/api/runs/{run.id}/sql/schema")


__all__ = ["MAX_SQL_CHARS", "SQL_EXAMPLES", "SQL_TABLES", "SqlPage", "SqlResult", "build_sql_page", "iter_sql_csv",
           "run_query", "sql_schema"]


def run_query(run: Run, sql: str, settings: Settings) -> SqlResult:
    """One read-only SELECT over the run's tables, in the sandbox and limits of `settings`."""
    return run_sql(run.store, run.id, sql, settings.sql_timeout_s, settings.sql_max_rows)


def sql_schema(run: Run) -> SqlSchema:
    """The tables a query over the run sees, their columns and the example queries."""
    return load_sql_schema(run.store, run.id)
