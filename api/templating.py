"""Rendering a page: the one Jinja environment per templates folder, the context every page gets (header, nav,
scripts), and the page a run shows while it is not ready (PageRunDep raises, api/errors.py renders it here)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from api.state import AppState
from explorer.runs.store import RunRecord
from explorer.views.device import device_nav
from explorer.views.links import run_json
from explorer.views.ranks import rank_nav
from explorer.views.render import APP_SCRIPTS, make_environment
from explorer.views.runs import NotReadyPage


@lru_cache(maxsize=4)
def templates_for(templates_dir: Path, static_dir: Path) -> Jinja2Templates:
    return Jinja2Templates(env=make_environment(templates_dir, static_dir))


def render_page(request: Request, state: AppState, template: str, page: Any, *, active: str = "",
                plotly: bool = False, status_code: int = 200) -> HTMLResponse:
    """A page of the site: `page` is the template's one typed context (one module per page family in explorer.views)."""
    run = getattr(page, "run", None)
    context = {"page": page, "base": request.scope.get("root_path", ""), "inline": None, "active": active,
               "needs_plotly": plotly, "scripts": APP_SCRIPTS, "readonly": False,
               "device_profiles": device_nav(state.store, run), "rank_count": rank_nav(state.store, run),
               "has_collectives": isinstance(run, dict) and run.get("status") == "ready"
               and state.runs.get(str(run["id"])).has_collectives()}
    templates = templates_for(state.settings.templates_dir, state.settings.static_dir)
    return templates.TemplateResponse(request, template, context, status_code=status_code)


def not_ready_page(request: Request, state: AppState, run: RunRecord) -> HTMLResponse:
    """What a page of a queued, ingesting or failed run shows: its status and progress, refreshed until ready."""
    return render_page(request, state, "not_ready.html", NotReadyPage(run_json(run), f"/api/runs/{run.id}"))
