"""The steps page (`/runs/{id}/steps`, twin `/api/runs/{id}/steps`): one row per step and where its time went."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from explorer.analysis.steps import DEFAULT_STEP_ANNOTATION, MAX_ANNOTATION_CHARS
from explorer.model.shapes import (
    RunJson,
    StepsResult,
)
from explorer.runs.run import Run
from explorer.views.charts import (
    make_steps_figure,
)
from explorer.views.links import run_json


@dataclass
class StepsPage:
    """`/runs/{id}/steps?annotation=`; twin `/api/runs/{id}/steps` with the same query."""

    run: RunJson
    steps: StepsResult
    figures: dict[str, dict[str, Any]]
    twin: str = ""


def build_steps_page(run: Run, annotation: str = DEFAULT_STEP_ANNOTATION) -> StepsPage:
    """The page of `run.steps(annotation)`, the `/api/runs/{id}/steps` object."""
    data = run.steps(annotation)
    q = "" if annotation == DEFAULT_STEP_ANNOTATION else "?" + urlencode({"annotation": annotation})
    return StepsPage(run_json(run.record), data, {"steps": make_steps_figure(data)}, f"/api/runs/{run.id}/steps{q}")


__all__ = ["DEFAULT_STEP_ANNOTATION", "MAX_ANNOTATION_CHARS", "StepsPage", "build_steps_page"]
