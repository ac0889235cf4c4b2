"""Read-only SQL: answers SELECTs over the run's tables; refuses writes, files, extensions, settings."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from explorer.config import Settings
from explorer.store.sql import SQL_EXAMPLES, SQL_TABLES
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


# ---- the SQL page's routes: the query in the URL (JSON twin), the CSV download, the schema --------------

MIXED = ("select name, dur_ns, depth, lane = 'hardware' as on_device, dur_ns / 7 as sevenths, "
         "nullif(external_id, external_id) as nothing, [1, 2] as pair, json_extract_string(args, '$.note') as note "
         "from slices order by slice_id")


def test_get_with_q_is_the_post_twin(client: TestClient, run_id: str) -> None:
    posted = client.post(f"/api/runs/{run_id}/sql", json={"sql": MIXED}).json()
    got = client.get(f"/api/runs/{run_id}/sql", params={"q": MIXED}).json()
    assert got["columns"] == posted["columns"] and got["rows"] == posted["rows"] and len(got["rows"]) == 12


def csv_value(cell: str, like: Any) -> Any:
    """A CSV cell read back as the type of the JSON value beside it (the test's own reading)."""
    if like is None:
        return None if cell == "" else cell
    if isinstance(like, bool):
        return {"true": True, "false": False}[cell]
    if isinstance(like, int):
        return int(cell)
    if isinstance(like, float):
        return float(cell)
    if isinstance(like, list):
        return json.loads(cell)
    return cell


def test_csv_download_equals_the_json_result(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/sql", params={"q": MIXED}).json()
    r = client.get(f"/api/runs/{run_id}/sql.csv", params={"q": MIXED})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"] and r.headers["x-truncated"] == "false"
    header, *rows = list(csv.reader(io.StringIO(r.text)))
    assert header == body["columns"] and len(rows) == len(body["rows"]) == 12
    for cells, values in zip(rows, body["rows"], strict=True):
        assert [csv_value(c, v) for c, v in zip(cells, values, strict=True)] == values
    assert ["<script>alert(1)</script>"] in [[row[-1]] for row in rows]  # text comes back as written
    assert any(row[5] == "" for row in rows)  # null: an empty cell


def test_csv_cut_at_the_row_limit_says_so(settings: Settings, run_id: str, client: TestClient) -> None:
    settings.sql_max_rows = 4
    r = client.get(f"/api/runs/{run_id}/sql.csv", params={"q": "select range as i from range(10)"})
    assert r.headers["x-truncated"] == "true" and list(csv.reader(io.StringIO(r.text))) == [["i"], ["0"], ["1"], ["2"], ["3"]]


@pytest.mark.parametrize("route", ["sql", "sql.csv"])
@pytest.mark.parametrize(("q", "status", "code", "says"), [
    ("selec name from slices", 400, "query_rejected", "cannot parse"),
    ("select nosuchcolumn from slices", 400, "query_rejected", "nosuchcolumn"),
    ("drop table slices", 400, "query_rejected", "only SELECT"),
    ("select * from read_csv('/etc/passwd')", 400, "query_rejected", "query failed"),
    ("", 422, "validation", ""),
])
def test_get_routes_refuse_with_a_message(client: TestClient, run_id: str, route: str, q: str, status: int,
                                          code: str, says: str) -> None:
    body = assert_error(client.get(f"/api/runs/{run_id}/{route}", params={"q": q}), status, code)
    assert says in body["error"]["message"]


def test_get_routes_time_limit(settings: Settings, run_id: str, client: TestClient) -> None:
    settings.sql_timeout_s = 0.2
    for route in ("sql", "sql.csv"):
        r = client.get(f"/api/runs/{run_id}/{route}", params={"q": "select count(*) from range(100000000000) a"})
        assert "time limit" in assert_error(r, 400, "query_rejected")["error"]["message"]


def test_schema_lists_every_table_with_columns_types_and_rows(client: TestClient, run_id: str,
                                                              settings: Settings) -> None:
    body = client.get(f"/api/runs/{run_id}/sql/schema").json()
    tables = {t["name"]: t for t in body["tables"]}
    assert set(tables) == set(SQL_TABLES)
    run_dir = settings.data_dir / "runs" / run_id
    for name, table in tables.items():
        parquet = pq.ParquetFile(run_dir / f"{name}.parquet")
        assert [c["name"] for c in table["columns"]] == parquet.schema_arrow.names
        assert table["rows"] == parquet.metadata.num_rows
    types = {c["name"]: c["type"] for c in tables["slices"]["columns"]}
    assert types["ts_ns"] == "BIGINT" and types["name"] == "VARCHAR" and types["is_op"] == "BOOLEAN"
    assert tables["slices"]["rows"] == 12  # the fixture's X events
    assert [e["key"] for e in body["examples"]] == [e.key for e in SQL_EXAMPLES]


def test_unknown_run_is_404_on_every_sql_route(client: TestClient) -> None:
    for path in ("sql?q=select+1", "sql.csv?q=select+1", "sql/schema"):
        assert_error(client.get(f"/api/runs/nosuchrun/{path}"), 404, "run_not_found")


def test_sql_page_context_and_links(client: TestClient, run_id: str) -> None:
    q = "select name from slices where name like '<%'"
    resp = client.get(f"/runs/{run_id}/sql", params={"q": q})
    page = resp.context["page"]  # type: ignore[attr-defined]
    assert page.q == q and page.twin == f"/api/runs/{run_id}/sql/schema"
    assert [t["name"] for t in page.schema["tables"]] == [t["name"] for t in client.get(
        f"/api/runs/{run_id}/sql/schema").json()["tables"]]
    assert "&lt;%" in resp.text and "<%'" not in resp.text  # the query is escaped into the textarea
    assert 'class="on" id="tab-sql"' in resp.text
    overview = client.get(f"/runs/{run_id}").text
    assert f'href="/runs/{run_id}/sql"' in overview  # every run page's navigation links the SQL page


def test_openapi_documents_the_sql_routes_with_an_example(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in ("/api/runs/{run_id}/sql", "/api/runs/{run_id}/sql.csv", "/api/runs/{run_id}/sql/schema"):
        op = paths[path].get("get") or paths[path]["post"]
        assert op["tags"] == ["sql"] and "/runs/{run_id}/sql" in op["description"], path
    q = next(p for p in paths["/api/runs/{run_id}/sql.csv"]["get"]["parameters"] if p["name"] == "q")
    assert q["schema"]["examples"] == [SQL_EXAMPLES[0].sql]  # "Try it out" in /docs starts from a real query
    assert spec["components"]["schemas"]["SqlBody"]["examples"] == [{"sql": SQL_EXAMPLES[0].sql}]
