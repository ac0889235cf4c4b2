"""The Neuron Explorer-compatible query API (/api/v1) on a Neuron Parquet export fixture, checked against an
independent reading of the fixture's own files (pyarrow over SystemProfileEvents.parquet and the device tables)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from tests.api.conftest import assert_error

EXPORT = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "device_export"
SYSTEM = EXPORT / "system@latest" / "SystemProfileEvents.parquet"


@pytest.fixture(scope="module")
def neuron(tmp_path_factory: pytest.TempPathFactory) -> Any:
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"))
    with TestClient(create_app(settings)) as client:
        run_id = ingest_paths(client.app.state.explorer.store, [EXPORT], "trn1 capture").id  # type: ignore[attr-defined]
        yield client, run_id


def search(client: TestClient, name: str, body: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/db/{name}/_search", json=body)


def test_health(neuron: Any) -> None:
    client, _ = neuron
    r = client.get("/api/v1/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


@pytest.mark.parametrize("by", ["id", "name"])
def test_group_by_name_matches_the_fixture(neuron: Any, by: str) -> None:
    client, run_id = neuron
    sql = "SELECT name, count(*) FROM SystemProfileEvents GROUP BY name"
    r = search(client, run_id if by == "id" else "trn1 capture",
               {"type": "databaseExplorerQuery", "tableName": "SystemProfileEvents", "query": sql})
    assert r.status_code == 200, r.text
    body = r.json()
    name, count = body["columns"]
    assert name == "name" and count.startswith("count")
    want = Counter(pq.read_table(SYSTEM).column("name").to_pylist())
    assert {row[name]: row[count] for row in body["data"]} == dict(want) and body["rowCount"] == len(want)
    assert sum(want.values()) == 5 and len(want) == 2  # nrta_execute_schedule and nc_exec_running


def test_events_keep_the_exports_fields_and_exact_times(neuron: Any) -> None:
    client, run_id = neuron
    sql = "SELECT name, start_ts, end_ts, duration_ns, trace_event_source, process_id, nc_idx FROM SystemProfileEvents"
    r = search(client, run_id, {"type": "databaseExplorerQuery", "tableName": "SystemProfileEvents", "query": sql})
    got = sorted(tuple(row.values()) for row in r.json()["data"])
    want = sorted(zip(*(pq.read_table(SYSTEM).column(c).to_pylist() for c in (
        "name", "start_ts", "end_ts", "duration_ns", "trace_event_source", "process_id", "nc_idx")), strict=True))
    assert got == [tuple(w) for w in want]


def test_device_tables_under_run_at_profile(neuron: Any) -> None:
    client, run_id = neuron
    want = sum(pq.read_table(p).num_rows for p in (EXPORT / "matmul@latest").glob("Instruction*.parquet"))
    # the stored table normalises engine keys to lower case (PROFILE_SCHEMA.md, "Vocabulary")
    by_engine = Counter(e.lower() for e in pq.read_table(EXPORT / "matmul@latest" / "Instruction.parquet")
                        .column("engine").to_pylist())
    r = search(client, f"{run_id}@matmul", {"type": "databaseExplorerQuery", "tableName": "Instruction",
                                            "query": "SELECT engine, COUNT(*) cnt FROM Instruction GROUP BY 1"})
    assert r.status_code == 200, r.text
    assert {row["engine"]: row["cnt"] for row in r.json()["data"]} == dict(by_engine) and sum(by_engine.values()) == want
    # two profiles: the run's own name has no device tables (which one would be ambiguous)
    r = search(client, run_id, {"type": "databaseExplorerQuery", "query": "SELECT count(*) FROM Instruction"})
    assert_error(r, 400, "query_rejected")


def test_table_schema(neuron: Any) -> None:
    client, run_id = neuron
    r = search(client, run_id, {"type": "tableSchema", "tableName": "SystemProfileEvents"})
    fields = {f["name"]: f for f in r.json()["fields"]}
    assert list(fields)[:6] == ["id", "name", "start_ts", "end_ts", "duration_ns", "trace_event_source"]
    assert fields["start_ts"]["unit"] == "nanoseconds" and fields["start_ts"]["required"] is True
    assert fields["nc_idx"]["required"] is False and "lane" in fields
    # every field the schema lists is a column the query answers with
    cols = search(client, run_id, {"type": "databaseExplorerQuery", "query": "SELECT * FROM SystemProfileEvents"})
    assert cols.json()["columns"] == list(fields)
    r = search(client, f"{run_id}@rmsnorm_naive", {"type": "tableSchema", "tableName": "DmaPacket"})
    assert {f["name"] for f in r.json()["fields"]} >= set(pq.read_schema(
        EXPORT / "rmsnorm_naive@latest" / "DmaPacket.parquet").names)
    assert_error(search(client, run_id, {"type": "tableSchema", "tableName": "Nope"}), 400, "bad_request")


def test_list_db_files(neuron: Any) -> None:
    client, run_id = neuron
    body = search(client, f"{run_id}@matmul", {"type": "listDbFiles"}).json()
    files = {f["tableName"]: f for f in body["files"]}
    assert files["SystemProfileEvents"]["rows"] == pq.read_table(SYSTEM).num_rows
    assert files["DmaPacket"]["rows"] == pq.read_table(EXPORT / "matmul@latest" / "DmaPacket.parquet").num_rows
    assert set(body["databases"]) == {run_id, f"{run_id}@rmsnorm_naive", f"{run_id}@matmul"}


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO '/tmp/x.csv'",
    "ATTACH '/tmp/x.db' AS x",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('/etc/passwd')",
    "INSTALL httpfs",
    "SELECT 1; SELECT 2",
    "DROP VIEW SystemProfileEvents",
])
def test_forbidden_statements_are_rejected(neuron: Any, sql: str) -> None:
    client, run_id = neuron
    r = search(client, run_id, {"type": "databaseExplorerQuery", "tableName": "SystemProfileEvents", "query": sql})
    body = assert_error(r, 400, "query_rejected")
    assert body["error"]["message"]
    assert "root:" not in r.text


@pytest.mark.parametrize(("name", "body", "status", "code"), [
    ("nope", {"type": "listDbFiles"}, 404, "run_not_found"),
    ("RUN@nope", {"type": "listDbFiles"}, 400, "bad_request"),
    ("RUN", {"type": "launchMissiles"}, 422, "validation"),
    ("RUN", {"type": "databaseExplorerQuery", "tableName": "Nope", "query": "SELECT 1"}, 400, "bad_request"),
    ("RUN", {"type": "databaseExplorerQuery", "query": ""}, 422, "validation"),
])
def test_bad_requests(neuron: Any, name: str, body: dict[str, Any], status: int, code: str) -> None:
    client, run_id = neuron
    assert_error(search(client, name.replace("RUN", run_id), body), status, code)
