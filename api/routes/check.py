"""The CI regression gate as an API: GET /api/check, the same rows as `trace-explorer check`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import StateDep
from explorer.model.shapes import CheckResult
from explorer.views.check import DEFAULT_MAX_REGRESSION, REF_HELP, compute_run_check

router = APIRouter(prefix="/api", tags=["check"])


@router.get("/check")
def check(state: StateDep, baseline: Annotated[str, Query(description=REF_HELP, max_length=300)],
          candidate: Annotated[str, Query(description=REF_HELP, max_length=300)],
          metric: Annotated[list[str] | None, Query(description="device_total, cpu_total, step_time, op:NAME, "
                                                   "kernel:NAME (repeatable; default: see docs/API.md)")] = None,
          max_regression: Annotated[str, Query(description="5% or the fraction 0.05")] = DEFAULT_MAX_REGRESSION,
          ) -> CheckResult:
    """The candidate run against the baseline, metric by metric; a regression is `passed: false` (200)."""
    return compute_run_check(state.store, baseline, candidate, metric or (), max_regression)
