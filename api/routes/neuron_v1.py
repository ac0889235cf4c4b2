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
from explorer.views.neuron_v1 import MAX_SQL_CHARS, list_tables, query_tables, table_fields

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
    out: dict[str, Any] = {"type": body.type, "name": name}
    if isinstance(body, QueryBody):
        out |= query_tables(state.store, state.settings, name, body.tableName, body.query)
    elif isinstance(body, SchemaBody):
        out |= table_fields(state.store, name, body.tableName)
    else:
        out |= list_tables(state.store, name)
    return JSONResponse(jsonable_encoder(out))
