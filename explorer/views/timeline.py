"""The timeline page (`/runs/{id}/timeline`) and the tracks list its canvas reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from explorer.analysis.timeline.layout import display_order
from explorer.model.ranks import track_ranks
from explorer.model.shapes import (
    RunJson,
    Tracks,
)
from explorer.runs.run import Run
from explorer.views.links import run_json


@dataclass
class TimelinePage:
    """`/runs/{id}/timeline`; the canvas pulls `/api/runs/{id}/timeline` windows itself."""

    run: RunJson
    span_ns: int
    twin: str = ""


def build_timeline_page(run: Run) -> TimelinePage:
    start, end = run.default_window()
    return TimelinePage(run_json(run.record), run.span_ns,
                        f"/api/runs/{run.id}/timeline?start_ns={start}&end_ns={end}&width_px=2000")


def build_tracks(run: Run, offset: int = 0, limit: int | None = None) -> Tracks:
    """The `/api/runs/{id}/tracks` object: every column of the tracks table (sort_key included: the
    timeline orders tracks by it within a lane), `total` of them. With `limit`, one page of the tracks in
    the timeline's order (a run of a million thread ids lists in milliseconds). Runs stored before the rank
    column get it read from their instance labels (explorer.model.ranks)."""
    table = run.table("tracks")
    total = table.num_rows
    if limit is not None:
        table = table.take(pa.array(display_order(table)[offset:offset + limit]))
    rows: Any = table.to_pylist()
    if "rank" not in table.column_names:
        for row, rank in zip(rows, track_ranks(table).tolist(), strict=True):
            row["rank"], row["host"] = int(rank), ""
    return {"origin_ns": run.origin_ns, "tracks": rows, "total": total}
