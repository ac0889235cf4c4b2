"""Every JSON route documents its response shape in /openapi.json, and the routes that skip validation on
the way out (timeline window, breakdown, event, search: msgspec-encoded) really send that shape."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter, ValidationError

from explorer.config import Settings
from explorer.model.shapes import Breakdown, EventDetail, SearchResult, TimelineWindow, Tracks
from tests.api.conftest import Uploader

NO_BODY = {"204"}


def json_routes(spec: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, path, status, response) of every documented success response."""
    return [(method, path, status, response)
            for path, item in spec["paths"].items() for method, op in item.items()
            for status, response in op["responses"].items() if status.startswith("2") and status not in NO_BODY
            and set(response.get("content", {"application/json": {}})) != {"text/csv"}]  # CSV exports: no JSON


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def test_every_json_route_has_a_response_schema(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    routes = json_routes(spec)
    assert len(routes) >= 17  # every route under /api and /-, pages excluded (include_in_schema=False)
    for method, path, status, response in routes:
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        body = resolve(spec, schema)
        assert body.get("properties"), f"{method.upper()} {path} ({status}) documents no response shape"


def test_the_documented_run_summary_names_its_fields(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    run = resolve(spec, spec["paths"]["/api/runs/{run_id}"]["get"]["responses"]["200"]["content"][
        "application/json"]["schema"])
    summary = run["properties"]["summary"]
    assert {"start_ns", "span_ns", "slices", "device"} <= set(summary["properties"])
    assert "device_total_ns" in summary["properties"]["device"]["properties"]


def test_unvalidated_routes_send_their_documented_shape(client: TestClient, upload: Uploader,
                                                        settings: Settings) -> None:
    run = upload()
    base = f"/api/runs/{run['id']}"
    cases: list[tuple[str, Any]] = [(f"{base}/timeline", TimelineWindow), (f"{base}/timeline?width_px=3", TimelineWindow),
                                    (f"{base}/breakdown", Breakdown), (f"{base}/events/0", EventDetail),
                                    (f"{base}/search?q=a", SearchResult), (f"{base}/tracks", Tracks)]
    for path, shape in cases:
        body = client.get(path).json()
        try:
            TypeAdapter(shape).validate_python(body)
        except ValidationError as exc:  # an extra or missing key: the documented shape is wrong
            pytest.fail(f"{path}: {exc}")
    kinds = {t["kind"] for t in client.get(f"{base}/timeline").json()["tracks"]}
    assert {"slice", "counter"} <= kinds  # both window payloads were checked


def test_tracks_keep_sort_key(client: TestClient, upload: Uploader, settings: Settings) -> None:
    """The timeline orders a lane's tracks by sort_key; the API used to drop it (the report kept it)."""
    run = upload()
    body = client.get(f"/api/runs/{run['id']}/tracks").json()
    stored = pq.read_table(settings.data_dir / "runs" / run["id"] / "tracks.parquet").to_pylist()
    assert body["tracks"] == stored
    assert all("sort_key" in t for t in body["tracks"])
