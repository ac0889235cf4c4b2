"""Read-only SQL: answers SELECTs over the run's tables; refuses writes, files, extensions, settings."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from explorer.config import Settings
from tests.api.conftest import assert_error


def test_select_over_run_tables(client: TestClient, run_id: str) -> None:
    r = client.post(f"/api/runs/{run_id}/sql", json={
        "sql": "select lane, count(*) as n from slices group by lane order by lane"})
    body = r.json()
    assert body["columns"] == ["lane", "n"] and body["rows"] == [["framework", 5], ["hardware", 3], ["runtime", 4]]
    assert body["truncated"] is False and body["elapsed_ms"] >= 0
    args = client.post(f"/api/runs/{run_id}/sql", json={
        "sql": "select json_extract_string(args, '$.note') from slices where name = 'aten::mul'"}).json()
    assert args["rows"] == [["<script>alert(1)</script>"]]


def test_row_limit_truncates(settings: Settings, run_id: str, client: TestClient) -> None:
    settings.sql_max_rows = 3
    body = client.post(f"/api/runs/{run_id}/sql", json={"sql": "select * from range(10)"}).json()
    assert len(body["rows"]) == 3 and body["truncated"] is True


def test_time_limit_interrupts(settings: Settings, run_id: str, client: TestClient) -> None:
    settings.sql_timeout_s = 0.2
    r = client.post(f"/api/runs/{run_id}/sql", json={
        "sql": "select count(*) from range(100000000000) a"})
    body = assert_error(r, 400, "query_rejected")
    assert "time limit" in body["error"]["message"]


@pytest.mark.parametrize("sql", [
    "create table x as select 1",
    "insert into slices select * from slices",
    "drop table slices",
    "copy slices to '/tmp/out.csv'",
    "select * from read_csv('/etc/passwd')",
    "select * from '/etc/passwd'",
    "select * from read_text('/etc/hostname')",
    "select * from glob('/*')",
    "select * from read_parquet('https://example.com/x.parquet')",
    "install httpfs",
    "load httpfs",
    "attach '/tmp/x.db'",
    "set enable_external_access = true",
    "pragma version",
    "select 1; select 2",
    "select 1; drop table slices",
    "not sql at all",
])
def test_writes_files_and_settings_are_rejected(client: TestClient, run_id: str, sql: str) -> None:
    assert_error(client.post(f"/api/runs/{run_id}/sql", json={"sql": sql}), 400, "query_rejected")


def test_empty_body_is_422(client: TestClient, run_id: str) -> None:
    assert_error(client.post(f"/api/runs/{run_id}/sql", json={"sql": ""}), 422, "validation")
    assert_error(client.post(f"/api/runs/{run_id}/sql", json={}), 422, "validation")
