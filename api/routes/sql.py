"""Read-only SQL over one run's tables (time and row limits from settings): JSON, CSV, and the schema the
SQL page (`/runs/{id}/sql`) lists beside its editor."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from api.deps import PageRunDep, RunDep, StateDep
from api.state import AppState
from api.templating import render_page
from explorer.model.shapes import SqlResult, SqlSchema
from explorer.runs.run import Run
from explorer.views.sql import (
    MAX_SQL_CHARS,
    SQL_EXAMPLES,
    SQL_TABLES,
    build_sql_page,
    iter_sql_csv,
    run_query,
    sql_schema,
)
from explorer.views.sql import SqlResult as SqlRows

router = APIRouter(prefix="/api/runs/{run_id}", tags=["sql"])
pages = APIRouter(include_in_schema=False)

EXAMPLE = SQL_EXAMPLES[0].sql
SANDBOX = (f"Exactly one SELECT over the run's tables ({', '.join(SQL_TABLES)}); writes, files, network, "
           "extensions and settings are refused (400 `query_rejected`, as are syntax errors and queries past the "
           "time limit). Rows stop at the row limit (`truncated`). Times are absolute integer ns. "
           "The same queries run in the page [`/runs/{run_id}/sql`](/runs/{run_id}/sql?q=select+1) "
           "(editor, schema, examples, CSV download); its URL carries the query.")
SqlQuery = Annotated[str, Query(min_length=1, max_length=MAX_SQL_CHARS, description="One SELECT statement",
                                examples=[EXAMPLE])]


class SqlBody(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"sql": EXAMPLE}]})

    sql: str = Field(..., min_length=1, max_length=MAX_SQL_CHARS, description="One SELECT statement")


def _rows(state: AppState, run: Run, sql: str) -> SqlRows:
    return run_query(run, sql, state.settings)



def _json(result: SqlRows) -> JSONResponse:
    # values encoded as FastAPI always encoded them (a DECIMAL as a number), hence the response built here
    return JSONResponse(jsonable_encoder(asdict(result)))


@router.post("/sql", response_model=SqlResult, summary="Run a read-only SQL query", description=SANDBOX)
def sql(run: RunDep, body: SqlBody, state: StateDep) -> JSONResponse:
    return _json(_rows(state, run, body.sql))


@router.get("/sql", response_model=SqlResult, summary="Run a read-only SQL query (query in the URL)",
            description=SANDBOX + " The JSON twin of the SQL page: the same `?q=`.")
def sql_get(run: RunDep, q: SqlQuery, state: StateDep) -> JSONResponse:
    return _json(_rows(state, run, q))


@router.get("/sql.csv", summary="Run a read-only SQL query, as CSV", response_class=StreamingResponse,
            description=SANDBOX + " The result as a CSV download: header row, then the rows (null as an empty "
            "cell, lists and maps as JSON). Header `X-Truncated: true` when the row limit cut it.",
            responses={200: {"content": {"text/csv": {}}}})
def sql_csv(run: RunDep, q: SqlQuery, state: StateDep) -> StreamingResponse:
    result = _rows(state, run, q)  # runs before the response starts, so a refusal is a 400, not a cut stream
    headers = {"Content-Disposition": f'attachment; filename="{run.id}-query.csv"',
               "X-Truncated": "true" if result.truncated else "false"}
    return StreamingResponse(iter_sql_csv(result), media_type="text/csv; charset=utf-8", headers=headers)


@router.get("/sql/schema", response_model=SqlSchema, summary="Tables, columns and example queries for SQL",
            description="The tables a query over this run sees, each column with its DuckDB type, row counts, and "
            "the example queries of the SQL page [`/runs/{run_id}/sql`](/runs/{run_id}/sql).")
def schema(run: RunDep) -> SqlSchema:
    return sql_schema(run)


@pages.get("/runs/{run_id}/sql", response_class=HTMLResponse)
def sql_page(request: Request, run: PageRunDep, state: StateDep,
             q: Annotated[str, Query(max_length=MAX_SQL_CHARS)] = "") -> HTMLResponse:
    return render_page(request, state, "sql.html", build_sql_page(run, q), active="sql")
