"""`/docs` in a real browser: Swagger UI renders the server's own OpenAPI document from the static folder,
with no request to another host and no CSP violation (the page guard fails on either)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_api_docs_render_offline_under_the_csp(server: Server, page: Any, shot: Any) -> None:
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(server.url + "/docs")
    page.wait_for_selector(".opblock-summary-path")
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert any(p.strip() == "/api/runs" for p in paths), paths[:10]
    assert page.locator(".info .title").inner_text().startswith("Trace Explorer")
    assert any(r.endswith("/openapi.json") for r in requests)
    assert all(r.startswith(server.url) or r.startswith("data:") for r in requests), requests
    shot(page, "api-docs")
