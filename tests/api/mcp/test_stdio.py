"""`trace-explorer mcp` over stdio (a subprocess, as Claude Code or Cursor start it), driven by the mcp SDK's client:
it ingests a path, and its answers are the HTTP API's answers over the same data folder; a hostile run name comes back
verbatim; the protocol stream carries nothing else (a stray print would break the client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from api.mcp.tools import TOOLS
from explorer.config import Settings
from tests.api.mcp.conftest import HOSTILE, TINY, assert_bounded_twin, call, run_session, stdio_params


def test_stdio_server_ingests_and_answers_as_the_api(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def steps(client: Any) -> dict[str, Any]:
        names = {t.name for t in (await client.list_tools()).tools}
        run = (await call(client, "ingest_path", paths=[str(TINY)], name=HOSTILE))["run"]
        again = await call(client, "ingest_path", paths=[str(TINY)])
        missing = await client.call_tool("ops", {"run": "no-such-run"})
        return {"names": names, "run": run, "again": again, "missing": missing.content[0].text,
                "listed": await call(client, "list_runs"),
                "ops": await call(client, "ops", run=run["id"], view="all", limit=200, max_chars=100_000),
                "kernels": await call(client, "kernels", run=run["id"], limit=200, max_chars=100_000),
                "cut": await call(client, "ops", run=run["id"], view="all", limit=2),
                "report": (await client.read_resource(f"run://{run['id']}/report.md")).contents[0].text}

    got = run_session(lambda: stdio_params(data), steps)
    assert "ingest_path" in got["names"] and got["names"] == {t.name for t in TOOLS}
    assert got["run"]["name"] == HOSTILE and got["run"]["status"] == "ready"
    assert got["again"]["reused"] is True and got["again"]["run"]["id"] == got["run"]["id"]
    assert '"code":"run_not_found"' in got["missing"]
    assert [r["name"] for r in got["listed"]["runs"]] == [HOSTILE]
    run_id = got["run"]["id"]
    with TestClient(create_app(Settings(data_dir=data))) as api:
        ops = api.get(f"/api/runs/{run_id}/ops", params={"view": "all"}).json()
        assert_bounded_twin(got["ops"], ops)
        assert len(got["ops"]["rows"]) == len(ops["rows"]) and got["ops"]["truncated"] == []
        assert_bounded_twin(got["kernels"], api.get(f"/api/runs/{run_id}/kernels").json())
    assert [{k: v for k, v in r.items() if not k.endswith("_human")} for r in got["cut"]["rows"]] == ops["rows"][:2]
    more = len(ops["rows"]) - 2
    assert got["cut"]["truncated"] == [f"truncated, {more:,} more in rows (2 of {len(ops['rows']):,} shown) — narrow "
                                       "with q=, view=, rank=, start_ns=/end_ns=, or raise limit"]
    assert got["report"].splitlines()[0] == f"# Run `` {HOSTILE} `` ({run_id})"  # a code span: no markup inside
