"""Search over the whole run: substring, regex, args, limits, bad regex."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import assert_error


def test_substring_is_case_insensitive_in_time_order(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/search?q=KERNEL").json()
    assert body["count"] == 6
    assert [m["ts"] for m in body["matches"]] == sorted(m["ts"] for m in body["matches"])
    assert body["matches"][0] == {"slice_id": 5, "name": "cudaLaunchKernel", "lane": "runtime", "track_id": 1,
                                  "ts": 30_000, "dur": 10_000}


def test_limit_keeps_the_earliest(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/search?q=kernel&limit=2").json()
    assert body["count"] == 6 and [m["slice_id"] for m in body["matches"]] == [5, 9]


def test_regex_and_args(client: TestClient, run_id: str) -> None:
    assert client.get(f"/api/runs/{run_id}/search?q=^aten::(mul|add)$&regex=1").json()["count"] == 2
    assert client.get(f"/api/runs/{run_id}/search?q=alert").json()["count"] == 0
    body = client.get(f"/api/runs/{run_id}/search?q=alert&args=1").json()
    assert [m["name"] for m in body["matches"]] == ["aten::mul"]


def test_bad_search_is_rejected(client: TestClient, run_id: str) -> None:
    assert_error(client.get(f"/api/runs/{run_id}/search?q=(unclosed&regex=1"), 400, "bad_request")
    assert_error(client.get(f"/api/runs/{run_id}/search"), 422, "validation")
