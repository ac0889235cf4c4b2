"""The SQL page (`/runs/{id}/sql`): the editor and the schema beside it."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.model.shapes import (
    RunJson,
    SqlSchema,
)
from explorer.runs.run import Run
from explorer.store.sql import load_sql_schema
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
