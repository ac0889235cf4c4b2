"""HTML pages: each handler builds one typed context (explorer.views.pages) and renders it; the same data
is what the page's JSON twin returns. No SQL, no plotly, no formatting here (CONTRIBUTING.md, habits 2, 3, 8)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Query, Request
from fastapi.responses import HTMLResponse, Response

from api.deps import (
    PageRunDep,
    RankFilter,
    RunDep,
    ShareRunDep,
    StateDep,
    get_ready_run,
    origin_ns,
    parse_csv,
)
from api.state import AppState
from api.templating import render_page, templates_for
from explorer.analysis.kernels import DEFAULT_KERNEL_SORT
from explorer.analysis.rank_slices import parse_ranks
from explorer.analysis.steps import DEFAULT_STEP_ANNOTATION
from explorer.model.source_links import SourceLinker
from explorer.report.html import build_report, render_report
from explorer.store.catalog.catalog import RunRecord
from explorer.store.queries import DEFAULT_OP_VIEW
from explorer.store.sql import MAX_SQL_CHARS
from explorer.views.advice import OVERVIEW_FINDINGS, compare_findings
from explorer.views.pages import (
    build_collectives_page,
    build_compare_page,
    build_kernels_page,
    build_ops_page,
    build_overview,
    build_runs_page,
    build_sql_page,
    build_steps_page,
    build_timeline_page,
)
from explorer.views.render import REPORT_CSP

router = APIRouter(include_in_schema=False)
log = logging.getLogger(__name__)


def _report_response(state: AppState, run: RunRecord, readonly: bool, twin: str = "",
                     headers: dict[str, str] | None = None) -> HTMLResponse:
    """The report as a response, with its own policy: its scripts are inline, not the pages' files."""
    return HTMLResponse(_report_html(state, run, readonly, twin),
                        headers={"Content-Security-Policy": REPORT_CSP, **(headers or {})})


def _report_html(state: AppState, run: RunRecord, readonly: bool, twin: str = "") -> str:
    ov = build_overview(state.store, run.id, state.breakdown(run.id))
    report = replace(build_report(state.store, run.id, overview=ov, index=state.timeline_index(run.id, origin_ns(run)),
                                  kernels=state.kernels(run.id), advice=state.advice(run.id)),
                     readonly=readonly, twin=twin)
    env = templates_for(state.settings.templates_dir, state.settings.static_dir).env
    return render_report(report, env, state.settings.static_dir)


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, state: StateDep, name: str = "", tag: str = "") -> HTMLResponse:
    return render_page(request, state, "runs.html", build_runs_page(state.store, name, tag))


def _warm_timeline(state: AppState, run: RunRecord, background: BackgroundTasks) -> None:
    """Build the run's timeline index after this response, so the timeline's first window is fast
    (the overview is usually opened before the timeline)."""
    background.add_task(state.timeline_index, run.id, origin_ns(run))


def overview_findings(state: AppState, run_id: str) -> list[Any]:
    """The overview's top findings. The advisor failing on an unusual run (AdviceBug, or any bug) is logged and
    leaves the panel out; the overview itself still shows (the Advice page reports the error)."""
    try:
        return list(state.advice(run_id)["findings"][:OVERVIEW_FINDINGS])
    except Exception:
        log.exception("the advisor failed on run %s; the overview shows no findings", run_id)
        return []


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def overview_page(request: Request, run: PageRunDep, state: StateDep, background: BackgroundTasks,
                  rank: RankFilter = None) -> HTMLResponse:
    _warm_timeline(state, run, background)
    page = build_overview(state.store, run.id, state.breakdown(run.id, parse_ranks(rank)), rank or "")
    page.findings = overview_findings(state, run.id)
    return render_page(request, state, "overview.html", page, active="overview", plotly=True)


@router.get("/runs/{run_id}/timeline", response_class=HTMLResponse)
def timeline_page(request: Request, run: PageRunDep, state: StateDep, background: BackgroundTasks) -> HTMLResponse:
    _warm_timeline(state, run, background)
    return render_page(request, state, "timeline.html", build_timeline_page(state.store, run.id), active="timeline")


@router.get("/runs/{run_id}/ops", response_class=HTMLResponse)
def ops_page(request: Request, run: PageRunDep, state: StateDep, sort: str | None = None, q: str = "",
             by_shape: bool = False, limit: int | None = Query(None, ge=1, le=100000),
             view: str = DEFAULT_OP_VIEW, by_module: bool = False, page: int = Query(1, ge=1),
             rank: RankFilter = None) -> HTMLResponse:
    ops = build_ops_page(state.store, run.id, sort=sort, q=q, by_shape=by_shape, limit=limit, view=view,
                         links=SourceLinker.from_settings(state.settings), by_module=by_module, page=page,
                         rank=rank or "")
    return render_page(request, state, "ops.html", ops, active="ops", plotly=True)


@router.get("/runs/{run_id}/steps", response_class=HTMLResponse)
def steps_page(request: Request, run: PageRunDep, state: StateDep, annotation: str = DEFAULT_STEP_ANNOTATION) -> HTMLResponse:
    return render_page(request, state, "steps.html", build_steps_page(state.store, run.id, annotation), active="steps",
                   plotly=True)


@router.get("/runs/{run_id}/kernels", response_class=HTMLResponse)
def kernels_page(request: Request, run: PageRunDep, state: StateDep, sort: str = DEFAULT_KERNEL_SORT, q: str = "",
                 category: str = "", limit: int | None = Query(None, ge=1, le=100000),
                 page: int = Query(1, ge=1), rank: RankFilter = None) -> HTMLResponse:
    kt = build_kernels_page(state.store, run.id, sort=sort, q=q, category=category, limit=limit,
                            kernels=state.kernels(run.id, parse_ranks(rank)), page=page, rank=rank or "")
    return render_page(request, state, "kernels.html", kt, active="kernels", plotly=True)


@router.get("/runs/{run_id}/collectives", response_class=HTMLResponse)
def collectives_page(request: Request, run: PageRunDep, state: StateDep, sort: str = "-wait_ns",
                     limit: int | None = Query(None, ge=1, le=100000)) -> HTMLResponse:
    page = build_collectives_page(state.store, run.id, sort=sort, limit=limit, colls=state.collectives(run.id))
    return render_page(request, state, "collectives.html", page, active="collectives")


@router.get("/runs/{run_id}/sql", response_class=HTMLResponse)
def sql_page(request: Request, run: PageRunDep, state: StateDep, q: str = Query("", max_length=MAX_SQL_CHARS)) -> HTMLResponse:
    return render_page(request, state, "sql.html", build_sql_page(state.store, run.id, q), active="sql")


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, state: StateDep, runs: str = "", baseline: str | None = None) -> HTMLResponse:
    ids = parse_csv(runs, "runs") or []
    page = build_compare_page(state.store, ids, baseline)
    first, *rest = [r["id"] for r in page.compare["runs"]]
    page.findings = [compare_findings(state.advice(first), state.advice(r)) for r in rest]
    return render_page(request, state, "compare.html", page, plotly=True)


@router.get("/runs/{run_id}/report", response_class=HTMLResponse)
def report_page(run: RunDep, state: StateDep, download: bool = False) -> Response:
    """The self-contained report (the same file `trace-explorer report` writes)."""
    if download:  # a file to keep: no links back to this server
        return _report_response(state, run, readonly=False,
                                headers={"Content-Disposition": f'attachment; filename="report-{run.id}.html"'})
    return _report_response(state, run, readonly=False, twin=f"/api/runs/{run.id}")


@router.get("/s/{token}", response_class=HTMLResponse)
def share_page(token: str, run: ShareRunDep, state: StateDep) -> HTMLResponse:
    """What a share link opens: the run's report, read-only."""
    return _report_response(state, get_ready_run(run), readonly=True, twin=f"/api/s/{token}")
