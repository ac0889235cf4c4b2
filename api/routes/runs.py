"""Runs: upload (streamed, ingested in the background), list, get, rename/tag, delete, tracks."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from api.deps import AnyRunDep, RunDep, StateDep
from api.schemas import UploadAccepted
from api.templating import render_page
from api.upload import receive_upload
from api.views import run_json
from explorer.errors import RunNotReady
from explorer.model.shapes import RunJson, RunList, Tracks
from explorer.runs.records import default_run_name
from explorer.views.runs import build_runs_page, compute_run_list
from explorer.views.timeline import run_tracks

router = APIRouter(prefix="/api/runs", tags=["runs"])
pages = APIRouter(include_in_schema=False)

UPLOAD_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"], "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "name": {"type": "string"}, "tags": {"type": "string", "description": "comma-separated"}}}}}}}


class RunPatch(BaseModel):
    name: str | None = Field(None, min_length=1, max_length=200)
    tags: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = Field(None, max_length=50)


@router.post("", status_code=202, openapi_extra=UPLOAD_BODY,
             responses={200: {"model": UploadAccepted, "description": "the same content is already a run"}})
async def upload_run(request: Request, state: StateDep, response: Response) -> UploadAccepted:
    """Upload trace files (or an archive) as one run; ingest runs in the background."""
    upload = await receive_upload(request, state.store.tmp_dir, state.settings.max_upload_bytes,
                                  state.settings.max_queued_bytes)
    existing = state.store.catalog.find_by_sha(upload.sha256)
    if existing is not None:
        upload.discard()
        response.status_code = 200
        return {"id": existing.id, "status": existing.status, "status_url": f"/api/runs/{existing.id}",
                "duplicate_of": existing.id}
    name = upload.fields.get("name", "").strip() or default_run_name(upload.paths, "upload")
    rec = state.store.catalog.create(name[:200], source=", ".join(p.name for p in upload.paths), sha256=upload.sha256)
    tags = [t.strip() for t in upload.fields.get("tags", "").split(",") if t.strip()]
    if tags:
        state.store.catalog.set_tags(rec.id, tags)
    state.ingester.submit(rec.id, upload)
    return {"id": rec.id, "status": "queued", "status_url": f"/api/runs/{rec.id}", "duplicate_of": None}


@router.get("")
def list_runs(state: StateDep, name: str | None = None, tag: str | None = None, status: str | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 50,
              offset: Annotated[int, Query(ge=0, le=2**53)] = 0) -> RunList:
    return compute_run_list(state.store, name=name, tag=tag, status=status, limit=limit, offset=offset)


@router.get("/{run_id}")
def get_run(run: AnyRunDep) -> RunJson:
    return run_json(run)


@router.patch("/{run_id}")
def patch_run(run: AnyRunDep, patch: RunPatch, state: StateDep) -> RunJson:
    if patch.name is not None:
        state.store.catalog.update(run.id, name=patch.name.strip() or run.name)
    if patch.tags is not None:
        state.store.catalog.set_tags(run.id, sorted({t.strip() for t in patch.tags if t.strip()}))
    return run_json(state.store.get(run.id))


@router.delete("/{run_id}", status_code=204)
def delete_run(run: AnyRunDep, state: StateDep) -> Response:
    if run.status in ("queued", "ingesting"):
        raise RunNotReady(f"run {run.id} is {run.status}; delete it when the ingest has finished")
    state.runs.forget(run.id)
    state.store.delete(run.id)
    return Response(status_code=204)


@router.get("/{run_id}/tracks")
def tracks(run: RunDep, state: StateDep, offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
           limit: Annotated[int | None, Query(ge=1, le=100_000)] = None) -> Tracks:
    """Every track with all its columns (with `limit`: a page, in the timeline's order); the timeline orders
    a lane's tracks by `sort_key`. The tracks of the run's device profiles follow (on the first page),
    each with its `device_profile` and `group`."""
    return run_tracks(run, offset, limit)


@pages.get("/", response_class=HTMLResponse)
def runs_page(request: Request, state: StateDep, name: str = "", tag: str = "") -> HTMLResponse:
    return render_page(request, state, "runs.html", build_runs_page(state.store, name, tag))
