"""The offline report of a run: its page, its download, and what a share link opens (read-only)."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from api.deps import RunDep, ShareRunDep, StateDep, ready_run
from api.state import AppState
from api.templating import templates_for
from explorer.report.html import build_report, render_report
from explorer.runs.run import Run
from explorer.views.render import REPORT_CSP

router = APIRouter(include_in_schema=False)


def report_response(state: AppState, run: Run, readonly: bool, twin: str = "",
                    headers: dict[str, str] | None = None) -> HTMLResponse:
    """The report as a response, with its own policy: its scripts are inline, not the pages' files."""
    report = replace(build_report(run), readonly=readonly, twin=twin)
    env = templates_for(state.settings.templates_dir, state.settings.static_dir).env
    return HTMLResponse(render_report(report, env, state.settings.static_dir),
                        headers={"Content-Security-Policy": REPORT_CSP, **(headers or {})})


@router.get("/runs/{run_id}/report", response_class=HTMLResponse)
def report_page(run: RunDep, state: StateDep, download: bool = False) -> Response:
    """The self-contained report (the same file `trace-explorer report` writes)."""
    if download:  # a file to keep: no links back to this server
        return report_response(state, run, readonly=False,
                               headers={"Content-Disposition": f'attachment; filename="report-{run.id}.html"'})
    return report_response(state, run, readonly=False, twin=f"/api/runs/{run.id}")


@router.get("/s/{token}", response_class=HTMLResponse)
def share_page(token: str, run: ShareRunDep, state: StateDep) -> HTMLResponse:
    """What a share link opens: the run's report, read-only."""
    return report_response(state, ready_run(state, run), readonly=True, twin=f"/api/s/{token}")
