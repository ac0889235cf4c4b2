"""Share tokens: create, list, revoke; `/api/s/{token}` resolves a token to its run (the JSON twin of
the `/s/{token}` page, which the UI renders with `ShareRunDep`)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import AnyRunDep, ShareRunDep, StateDep
from api.schemas import SharedRun, ShareJson, ShareList
from api.views import run_json, share_json
from explorer.errors import ShareNotFound

router = APIRouter(tags=["share"])


@router.post("/api/runs/{run_id}/share", status_code=201)
def create_share(run: AnyRunDep, state: StateDep) -> ShareJson:
    return share_json(state.store.catalog.create_share(run.id))


@router.get("/api/runs/{run_id}/shares")
def list_shares(run: AnyRunDep, state: StateDep) -> ShareList:
    return {"shares": [share_json(s) for s in state.store.catalog.shares(run.id)]}


@router.delete("/api/runs/{run_id}/shares/{token}", status_code=204)
def revoke_share(run: AnyRunDep, token: str, state: StateDep) -> Response:
    if not state.store.catalog.revoke_share(run.id, token):
        raise ShareNotFound(f"run {run.id} has no share token {token!r}")
    return Response(status_code=204)


@router.get("/api/s/{token}")
def resolve_share(run: ShareRunDep) -> SharedRun:
    return {"run_id": run.id, "run": run_json(run)}
