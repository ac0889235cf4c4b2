"""Every integer query parameter of every GET route, sent values no 64-bit integer holds (and the
edges): a 4xx or an answer, never a 500. Parameters come from the app's own OpenAPI document, so a new
route is covered the day it is added."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

EXTREMES = ["9223372036854775808", "-9223372036854775809", "1" + "0" * 40, "9223372036854775807"]


def integer_query_params(openapi: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for path, ops in openapi["paths"].items():
        for param in ops.get("get", {}).get("parameters", []):
            schema = param.get("schema", {})
            types = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
            if param["in"] == "query" and "integer" in types:
                found.append((path, param["name"]))
    return found


def test_no_integer_parameter_overflows_into_a_500(client: TestClient, run_id: str) -> None:
    params = integer_query_params(client.get("/openapi.json").json())
    assert ("/api/runs", "offset") in params and len(params) >= 5
    failures = []
    client = TestClient(client.app, raise_server_exceptions=False)
    for path, name in params:
        url = path.replace("{run_id}", run_id).replace("{profile_id}", "p0")
        for value in EXTREMES:
            r = client.get(url, params={name: value})
            if r.status_code >= 500:
                failures.append((path, name, value, r.status_code, r.text[:200]))
    assert failures == []
