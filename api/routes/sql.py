"""Read-only SQL over one run's tables (time and row limits from settings)."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.deps import RunDep, StateDep
from explorer.model.shapes import SqlResult
from explorer.store.sql import MAX_SQL_CHARS, run_sql

router = APIRouter(prefix="/api/runs/{run_id}", tags=["sql"])


class SqlBody(BaseModel):
    sql: str = Field(..., min_length=1, max_length=MAX_SQL_CHARS, description="One SELECT statement")


@router.post("/sql", response_model=SqlResult)
def sql(run: RunDep, body: SqlBody, state: StateDep) -> JSONResponse:
    """Tables: slices, tracks, flows, counters, instants, op_stats, op_stats_by_shape. Values are encoded as
    FastAPI always encoded them (a DECIMAL as a number), hence the response built here."""
    s = state.settings
    return JSONResponse(jsonable_encoder(asdict(run_sql(state.store, run.id, body.sql, s.sql_timeout_s, s.sql_max_rows))))
