"""`/docs`: the API's Swagger UI, served from the static folder (no CDN, under the pages' CSP)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.deps import StateDep
from api.templating import templates_for

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request, state: StateDep) -> HTMLResponse:
    templates = templates_for(state.settings.templates_dir, state.settings.static_dir)
    return templates.TemplateResponse(request, "apidocs.html", {"base": request.scope.get("root_path", "")})
