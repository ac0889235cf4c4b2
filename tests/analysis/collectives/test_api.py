"""The collectives API and page over real HTTP: the 4-rank straggler uploaded as one run (rows with the
issue's fields, sort and limit, the overlay's links to the kernels), bad parameters answered 4xx, the
run nav's tab only where a run has collectives, hostile collective names escaped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from tests.analysis.collectives.synthetic import KERNEL, rank_events, straggler_calls, write_run

ISSUE_FIELDS = {"name", "process_group", "seq", "size_bytes", "ranks", "wait_ns", "transfer_ns", "last_arriver",
                "algbw", "busbw"}
RANK_FIELDS = {"rank", "arrival_ns", "start_ns", "end_ns", "wait_ns"}
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=tmp_path_factory.mktemp("colls-api")))) as c:
        yield c


def upload(client: TestClient, files: list[Path]) -> str:
    r = client.post("/api/runs", files=[("files", (f.name, f.read_bytes())) for f in files], data={"name": "colls"})
    assert r.status_code in (200, 202), r.text
    run_id = str(r.json()["id"])
    for _ in range(600):
        run = client.get(f"/api/runs/{run_id}").json()
        if run["status"] != "ingesting" and run["status"] != "queued":
            break
    assert run["status"] == "ready", run
    return run_id


@pytest.fixture(scope="module")
def run_id(client: TestClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    return upload(client, write_run(tmp_path_factory.mktemp("api-straggler"), {r: straggler_calls(r) for r in range(4)}))


def test_collectives_rows_have_the_issue_fields(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/collectives").json()
    assert body["total"] == 4 and body["mismatches"] == [] and body["ranks"] == [0, 1, 2, 3]
    for row in body["rows"]:
        assert set(row) >= ISSUE_FIELDS and all(set(x) >= RANK_FIELDS for x in row["ranks"])
        assert row["last_arriver"] == 2 and row["wait_ns"] == (5_200 + 5_100 + 4_900) * 1000
        assert isinstance(row["ranks"][0]["arrival_ns"], int)
    waits = [r["wait_ns"] for r in body["rows"]]
    assert waits == sorted(waits, reverse=True)
    assert [r["seq"] for r in client.get(f"/api/runs/{run_id}/collectives?sort=%2Bseq&limit=2").json()["rows"]] == [0, 1]


@pytest.mark.parametrize("query", ["sort=bogus", "limit=-1", "limit=abc"])
def test_bad_parameters_are_4xx_with_a_message(client: TestClient, run_id: str, query: str) -> None:
    r = client.get(f"/api/runs/{run_id}/collectives?{query}")
    assert 400 <= r.status_code < 500 and r.json()["error"]["message"]


def test_unknown_run_is_404(client: TestClient) -> None:
    assert client.get("/api/runs/nope/collectives").status_code == 404
    assert client.get("/api/runs/nope/collectives/links").status_code == 404


def test_links_join_each_ranks_kernel(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/collectives/links?start_ns=0&end_ns=1000000000").json()
    assert len(body["links"]) == 4
    for link in body["links"]:
        assert len(link["slice_ids"]) == 4 and link["last_arriver"] == 2
        events = [client.get(f"/api/runs/{run_id}/events/{sid}").json() for sid in link["slice_ids"]]
        assert {e["event"]["name"] for e in events} == {KERNEL}
    # a window after the first step holds only the later collectives
    later = client.get(f"/api/runs/{run_id}/collectives/links?start_ns=19000000&end_ns=1000000000").json()
    assert [lk["seq"] for lk in later["links"]] == [1, 2, 3]
    bad = client.get(f"/api/runs/{run_id}/collectives/links?start_ns=5&end_ns=5")
    assert bad.status_code == 400 and "end_ns" in bad.json()["error"]["message"]


def test_page_lists_the_collectives_and_links_the_timeline(client: TestClient, run_id: str) -> None:
    r = client.get(f"/runs/{run_id}/collectives")
    assert r.status_code == 200
    page = r.context["page"]  # type: ignore[attr-defined]
    assert page.data == client.get(f"/api/runs/{run_id}/collectives").json()
    html = r.text
    assert html.count('class="tl-link"') == 4 and "hl_start=" in html and 'id="tab-collectives"' in html
    assert html.count(">rank 2</td>") == 4
    assert f'href="/api/runs/{run_id}/collectives?sort=-wait_ns"' in html
    assert 'id="tab-collectives"' in client.get(f"/runs/{run_id}").text


def test_no_tab_without_collectives_and_hostile_names_escaped(client: TestClient, tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1,
                                                  "ts": 1, "dur": 2}]}))
    plain_id = upload(client, [plain])
    assert 'id="tab-collectives"' not in client.get(f"/runs/{plain_id}").text
    assert client.get(f"/api/runs/{plain_id}/collectives").json()["total"] == 0
    assert "No matched collectives" in client.get(f"/runs/{plain_id}/collectives").text

    files = []
    for rank in (0, 1):
        doc: dict[str, Any] = {"distributedInfo": {"rank": rank, "world_size": 2},
                               "traceEvents": rank_events(rank, straggler_calls(rank, steps=1), name=HOSTILE)}
        files.append(tmp_path / f"hostile-rank-{rank}.json")
        files[-1].write_text(json.dumps(doc))
    hostile_id = upload(client, files)
    rows = client.get(f"/api/runs/{hostile_id}/collectives").json()["rows"]
    assert len(rows) == 1 and "<script>" in rows[0]["name"]
    html = client.get(f"/runs/{hostile_id}/collectives").text
    assert "<script>alert" not in html and "&lt;script&gt;" in html
