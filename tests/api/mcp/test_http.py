"""The tools at /mcp on a running server (uvicorn, token set), driven by the mcp SDK's client: every tool is listed,
each answers what its HTTP JSON twin answers for the same question (bounded), the token and the origin rules hold
for /mcp as for the API, and a hostile run name comes back as its plain text."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import httpx
import pytest
from markdown_it import MarkdownIt

from tests.api.mcp.conftest import (
    HOSTILE,
    TOKEN,
    Served,
    assert_bounded_twin,
    call,
    http_transport,
    run_session,
)

pytestmark = pytest.mark.shared
ALL = {"limit": 200, "max_chars": 100_000}
SQL = "select name, count(*) as n, sum(dur_ns) as total from slices group by name order by total desc, name"


def twin_cases(s: Served, kernel_id: int, window: tuple[int, int]) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """(tool, its arguments, the twin's path, the twin's query) for one question each."""
    gpu, tiny, dev = s.runs["gpu"], s.runs["tiny"], s.runs["device"]
    return [
        ("list_runs", {}, "/api/runs", {"limit": 200}),
        ("run_summary", {"run": gpu}, f"/api/runs/{gpu}", {}),
        ("ops", {"run": gpu}, f"/api/runs/{gpu}/ops", {}),
        ("ops", {"run": gpu, "view": "all", "sort": "-cpu_total_ns", "q": "aten"}, f"/api/runs/{gpu}/ops",
         {"view": "all", "sort": "-cpu_total_ns", "q": "aten"}),
        ("kernels", {"run": gpu}, f"/api/runs/{gpu}/kernels", {}),
        ("kernels", {"run": gpu, "category": "memcpy HtoD"}, f"/api/runs/{gpu}/kernels", {"category": "memcpy HtoD"}),
        ("steps", {"run": tiny}, f"/api/runs/{tiny}/steps", {}),
        ("gaps", {"run": gpu}, f"/api/runs/{gpu}/breakdown", {}),
        ("chain", {"run": gpu, "slice_id": kernel_id}, f"/api/runs/{gpu}/events/{kernel_id}", {}),
        ("search", {"run": gpu, "q": "gemm"}, f"/api/runs/{gpu}/search", {"q": "gemm", "limit": 200}),
        ("compare", {"run_ids": [tiny, gpu]}, "/api/compare", {"runs": f"{tiny},{gpu}"}),
        ("check", {"baseline": tiny, "candidate": s.runs["hostile"]}, "/api/check",
         {"baseline": tiny, "candidate": s.runs["hostile"]}),
        ("ranks", {"run": gpu}, f"/api/runs/{gpu}/ranks", {}),
        ("collectives", {"run": gpu}, f"/api/runs/{gpu}/collectives", {}),
        ("device_profiles", {"run": dev}, f"/api/runs/{dev}/device/profiles", {}),
        ("memory", {"run": gpu}, f"/api/runs/{gpu}/memory", {}),
        ("advice", {"run": gpu}, f"/api/runs/{gpu}/advice", {}),
        ("device_summary", {"run": dev, "profile": "matmul"}, f"/api/runs/{dev}/device/summary", {"profile": "matmul"}),
        ("device_summary", {"run": dev, "profile": "matmul", "start_ns": window[0], "end_ns": window[1]},
         f"/api/runs/{dev}/device/summary", {"profile": "matmul", "start_ns": window[0], "end_ns": window[1]}),
    ]


def test_every_tool_answers_as_its_http_twin(served: Served) -> None:
    kernel = served.api(f"/api/runs/{served.runs['gpu']}/search", q="sgemm", limit=1)["matches"][0]["slice_id"]
    profile = next(p for p in served.api(f"/api/runs/{served.runs['device']}/device/profiles")["profiles"]
                   if p["profile_id"] == "matmul")
    window = (profile["start_ns"], profile["start_ns"] + (profile["end_ns"] - profile["start_ns"]) // 3)
    cases = twin_cases(served, kernel, window)

    async def steps(client: Any) -> tuple[list[Any], list[dict[str, Any]]]:
        listed = (await client.list_tools()).tools
        return listed, [await call(client, tool, **args, **ALL) for tool, args, _, _ in cases]

    listed, answers = run_session(http_transport(served.url, TOKEN), steps)
    names = [t.name for t in listed]
    assert all(t.annotations.read_only_hint for t in listed)
    assert all("limit" in t.input_schema["properties"] and "max_chars" in t.input_schema["properties"] for t in listed)
    assert "ingest_path" not in names  # a path on the server's disk: the local (stdio) server's only
    assert {c[0] for c in cases} | {"timeline_window", "sql"} == set(names)
    for (tool, args, path, query), answer in zip(cases, answers, strict=True):
        twin = served.api(path, **query)
        assert_bounded_twin(answer, twin, f"{tool}{args}")
        assert len(str(answer)) > 20
    # the profile window's Summary is recomputed, not the whole profile's
    assert answers[-1] != answers[-2]


def test_sql_and_timeline_window_against_their_twins(served: Served) -> None:
    gpu = served.runs["gpu"]

    async def steps(client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return (await call(client, "sql", run=gpu, query=SQL, limit=5),
                await call(client, "timeline_window", run=gpu, order="time", **ALL))

    sql, window = run_session(http_transport(served.url, TOKEN), steps)
    twin = served.api(f"/api/runs/{gpu}/sql", q=SQL)
    assert sql["columns"] == twin["columns"] and sql["rows"] == twin["rows"][:5]
    assert sql["row_limit_hit"] is twin["truncated"] is False
    assert sql["truncated"] == [f"truncated, {len(twin['rows']) - 5:,} more in rows (5 of {len(twin['rows']):,} shown)"
                                " — narrow with WHERE, GROUP BY or LIMIT in the query, or raise limit"]
    full = served.api(f"/api/runs/{gpu}/timeline", width_px=1000, height_px=4000)
    wide = {sid: (ts, dur) for t in full["tracks"] if t.get("slices")
            for sid, ts, dur in zip(t["slices"]["id"], t["slices"]["ts"], t["slices"]["dur"], strict=True)}
    merged = sum(len(t["merged"]["ts"]) for t in full["tracks"] if t.get("merged"))
    shown = [r for r in window["slices"] if "slice_id" in r]
    assert shown and all(wide[r["slice_id"]] == (r["start_ns"], r["dur_ns"]) for r in shown)
    starts = [r["start_ns"] for r in window["slices"]]
    assert starts == sorted(starts)
    total = len(wide) + merged
    assert len(window["slices"]) == min(total, 200)
    assert bool(window["truncated"]) is (total > 200)


def test_a_client_without_the_token_is_refused(served: Served) -> None:
    from mcp import MCPError

    async def steps(client: Any) -> Any:
        return await client.list_tools()

    for token in (None, "wrong-token"):
        statuses: list[int] = []
        with pytest.raises(ExceptionGroup) as caught:
            run_session(http_transport(served.url, token, statuses), steps)
        assert caught.group_contains(MCPError)
        assert statuses and set(statuses) == {401}, statuses
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    assert httpx.post(served.url + "/mcp", json=body, headers=headers).status_code == 401
    # a page on another origin cannot drive the tools with the cookie alone, nor name the server otherwise
    cookie = {"Cookie": f"explorer_token={TOKEN}"}
    refused = httpx.post(served.url + "/mcp", json=body, headers=headers | cookie | {"Origin": "http://evil.example"})
    assert refused.status_code == 403, refused.text
    rebound = httpx.post(served.url + "/mcp", json=body, headers=headers | {"Authorization": f"Bearer {TOKEN}",
                                                                        "Host": "evil.example"})
    assert rebound.status_code == 400, rebound.text
    # a share link opens one run's pages read-only, not the tools
    share = served.http.post(f"/api/runs/{served.runs['tiny']}/share").json()["token"]
    shared = httpx.post(served.url + "/mcp", json=body, headers=headers | {"X-Share-Token": share})
    assert shared.status_code == 401, shared.text
    ok = httpx.post(served.url + "/mcp", json=body, headers=headers | {"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "run_summary" in ok.text


def test_a_hostile_run_name_comes_back_as_plain_text(served: Served) -> None:
    run = served.runs["hostile"]

    async def steps(client: Any) -> tuple[dict[str, Any], str, str]:
        found = await call(client, "list_runs", name="<script>")
        result = await client.call_tool("run_summary", {"run": run})
        report = await client.read_resource(f"run://{run}/report.md")
        return found, result.content[0].text, report.contents[0].text

    found, text, report = run_session(http_transport(served.url, TOKEN), steps)
    assert [r["name"] for r in found["runs"]] == [HOSTILE]
    assert HOSTILE in text  # JSON text: the name verbatim, nothing escaped into entities or dropped as markup
    assert "&lt;" not in text and "[/bold]" not in text
    # rendered as GitHub renders Markdown (tables on), the name is the text of a code span: no tag, no emphasis
    html = MarkdownIt("commonmark").enable("table").render(report)
    first = html.splitlines()[0]
    assert first == f"<h1>Run <code>{escape(HOSTILE, quote=False)}</code> ({run})</h1>", first
    assert "<script" not in html and "<strong>" not in html


def test_an_app_serves_the_tools_in_each_of_its_lifespans(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from explorer.config import Settings

    app = create_app(Settings(data_dir=tmp_path / "data"))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    outside = TestClient(app, base_url="http://127.0.0.1").post("/mcp", json=body, headers=headers)
    assert outside.status_code == 503 and outside.json()["error"]["code"] == "busy"
    for _ in range(2):
        with TestClient(app, base_url="http://127.0.0.1") as client:
            listed = client.post("/mcp", json=body, headers=headers)
            assert listed.status_code == 200 and "run_summary" in listed.text
