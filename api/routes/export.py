"""Export a run for other tools: `GET /api/runs/{id}/export?format=perfetto-json` streams a Chrome JSON trace
that Perfetto loads (explorer/report/perfetto.py); an unknown format is a 400 before anything is streamed."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from api.deps import RunDep, StateDep
from explorer.model.shapes import PerfettoTrace
from explorer.report.perfetto import check_format, iter_perfetto_json

router = APIRouter(prefix="/api/runs/{run_id}", tags=["export"])


@router.get("/export", response_model=PerfettoTrace)
def export(run: RunDep, state: StateDep, format: str = "perfetto-json") -> StreamingResponse:
    """The whole run (every lane, counters, flows, Neuron device tracks) as a download; open it at
    ui.perfetto.dev ("Open trace file") or with trace_processor."""
    check_format(format)
    chunks = iter_perfetto_json(state.store, run.id, run.device_timeline())
    headers = {"Content-Disposition": f'attachment; filename="{run.id}.perfetto.json"'}
    return StreamingResponse(chunks, media_type="application/json", headers=headers)
