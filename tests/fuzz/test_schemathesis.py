"""schemathesis against the app's own OpenAPI document: every operation, bounded examples, over the real
app (ASGI, no network) with two ingested runs so that `run_id`-like path parameters point at real runs.

Checks: not_a_server_error (no 5xx), response_schema_conformance (bodies match their declared models),
status_code_conformance (every status the app sends is declared; the common error model is on every
router). Nothing is dropped.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

TESTS = Path(__file__).resolve().parent.parent
TINY = TESTS / "api" / "fixtures" / "tiny_kineto.json"
NEURON = TESTS / "fixtures" / "neuron" / "rmsnorm_naive"
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "50"))
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance]
REAL: dict[str, str] = {}  # path parameter -> a real value (filled by the fixture)


@pytest.fixture(scope="module")
def app_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    data = tmp_path_factory.mktemp("schemathesis") / "data"
    store = RunStore(data)
    first = ingest_paths(store, [TINY], "tiny")
    second = ingest_paths(store, [NEURON], "neuron")
    REAL.update(run_id=first.id, a=first.id, b=second.id, other=second.id)
    app = create_app(Settings(data_dir=data))
    with TestClient(app):  # runs the lifespan: the app's state is up while schemathesis calls it
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)

        @schema.hook
        def map_path_parameters(ctx: Any, path_parameters: dict[str, Any]) -> dict[str, Any]:
            # a real run most of the time, the generated (unknown) one otherwise: both answers are checked;
            # never a real run for the operation that deletes it
            if not path_parameters or ctx.operation.method.upper() == "DELETE" and ctx.operation.path == "/api/runs/{run_id}":
                return path_parameters
            for key, value in REAL.items():
                if key in path_parameters and hash(str(path_parameters[key])) % 4:
                    path_parameters[key] = value
            return path_parameters

        yield schema


def test_api_conforms(app_schema: Any, fuzz_report: Any) -> None:
    """Every operation, EXAMPLES generated cases each; all failures listed at the end, one per operation."""
    failures: dict[str, str] = {}
    labels: list[str] = []
    statuses: Counter[int] = Counter()
    for result in app_schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
                  derandomize=True, database=None)
        def check(case: Any) -> None:
            response = case.call_and_validate(checks=CHECKS)
            statuses[response.status_code] += 1

        try:
            check()
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - collected, reported together below
            failures[operation.label] = str(exc)[:1500]
    server_errors = sum(n for s, n in statuses.items() if s >= 500)
    fuzz_report("schemathesis", f"schemathesis: {sum(statuses.values())} calls over {len(labels)} operations "
                f"({EXAMPLES} examples each at most), statuses {dict(sorted(statuses.items()))}, "
                f"{server_errors} server errors, {len(failures)} failing operations",
                {"calls": sum(statuses.values()), "operations": len(labels), "statuses": dict(statuses),
                 "server_errors": server_errors, "failing_operations": sorted(failures)})
    assert all(s < 500 for s in statuses)
    assert statuses[200] > len(labels), "most operations should have been answered with a real run's data"
    assert failures == {}, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
