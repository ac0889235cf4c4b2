"""A Neuron Explorer-compatible query API, so scripts written for Neuron Explorer's API server work here:
`GET /api/v1/health` and `POST /api/v1/db/{name}/_search` with a `type` of `databaseExplorerQuery`,
`tableSchema` or `listDbFiles` (explorer/store/neuron_db.py holds the mapping; docs/API.md documents it)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.deps import StateDep
from explorer import __version__
from explorer.model.shapes import NeuronHealth, NeuronSearchResult
from explorer.store.neuron_db import db_names, query_db, require_table, resolve_db, table_rows, table_schema
from explorer.store.sql import MAX_SQL_CHARS

router = APIRouter(prefix="/api/v1", tags=["neuron-explorer"])


class QueryBody(BaseModel):
    type: Literal["databaseExplorerQuery"]
    tableName: str = Field("", description="The table the query reads (as Neuron Explorer's viewer sends it)")
    query: str = Field(..., min_length=1, max_length=MAX_SQL_CHARS, description="One SELECT statement")


class SchemaBody(BaseModel):
    type: Literal["tableSchema"]
    tableName: str


class ListBody(BaseModel):
    type: Literal["listDbFiles"]


SearchBody = Annotated[QueryBody | SchemaBody | ListBody, Field(discriminator="type")]


@router.get("/health", response_model=NeuronHealth)
def health() -> NeuronHealth:
    return {"status": "ok", "version": __version__}


@router.post("/db/{name}/_search", response_model=NeuronSearchResult)
def search(name: str, body: SearchBody, state: StateDep) -> JSONResponse:
    """`name`: a run id or name (`<run>@<device profile>` for that profile's tables)."""
    db = resolve_db(state.store, name)
    out: dict[str, Any] = {"type": body.type, "name": name}
    if isinstance(body, QueryBody):
        if body.tableName:
            require_table(db, body.tableName)
        s = state.settings
        res = query_db(state.store, db, body.query, s.sql_timeout_s, s.sql_max_rows)
        out |= {"tableName": body.tableName, "columns": res.columns,
                "data": [dict(zip(res.columns, row, strict=True)) for row in res.rows], "rowCount": len(res.rows),
                "truncated": res.truncated, "elapsedMs": res.elapsed_ms}
    elif isinstance(body, SchemaBody):
        out |= {"tableName": body.tableName, "fields": table_schema(db, body.tableName)}
    else:
        out |= {"files": [{"tableName": t, "file": f"{t}.parquet", "rows": table_rows(state.store, db, t)}
                          for t in db.table_names()], "databases": db_names(state.store, db.run)}
    return JSONResponse(jsonable_encoder(out))
