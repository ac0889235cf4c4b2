"""`rank=` on the op table, kernels and breakdown (API and pages) equals the run of that rank's file alone;
bad rank lists are a 400 with a message; the ranks page and its nav tab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

HTA = Path("HolisticTraceAnalysis/tests/data")


def _same_tables(client: TestClient, multi: str, rank: int, single: str) -> None:
    for route in ("ops", "ops?by_shape=1", "ops?view=all", "kernels"):
        sep = "&" if "?" in route else "?"
        filtered = client.get(f"/api/runs/{multi}/{route}{sep}rank={rank}")
        alone = client.get(f"/api/runs/{single}/{route}")
        assert filtered.status_code == alone.status_code == 200, filtered.text
        assert filtered.json() == alone.json() and filtered.json()["rows"], route
    whole = client.get(f"/api/runs/{multi}/kernels").json()
    assert whole["device_total_ns"] > client.get(f"/api/runs/{single}/kernels").json()["device_total_ns"]
    bd, bd_alone = (client.get(f"/api/runs/{r}/breakdown{q}").json()
                    for r, q in ((multi, f"?rank={rank}"), (single, "")))
    assert [(x["lane"], x["busy_ns"], x["slices"]) for x in bd["lanes"]] == \
           [(x["lane"], x["busy_ns"], x["slices"]) for x in bd_alone["lanes"]]
    # a device without a name is named by its track label, which in the multi-rank run starts "rank N · "
    assert [(d["device"].removeprefix(f"rank {rank} · "), d["busy_ns"], d["executions"]) for d in bd["devices"]] == \
           [(d["device"], d["busy_ns"], d["executions"]) for d in bd_alone["devices"]]
    assert bd["gaps"]["total_ns"] == bd_alone["gaps"]["total_ns"]


def test_rank_filter_equals_the_single_rank_run(rank_runs: dict[str, Any]) -> None:
    _same_tables(rank_runs["client"], rank_runs["straggler"], 2, rank_runs["single"])


def test_rank_filter_keeps_several_ranks(rank_runs: dict[str, Any]) -> None:
    client, run = rank_runs["client"], rank_runs["straggler"]
    every = client.get(f"/api/runs/{run}/kernels").json()
    two = client.get(f"/api/runs/{run}/kernels?rank=0,2").json()
    one = [client.get(f"/api/runs/{run}/kernels?rank={r}").json() for r in (0, 2)]
    assert two["device_total_ns"] == one[0]["device_total_ns"] + one[1]["device_total_ns"] < every["device_total_ns"]
    assert client.get(f"/api/runs/{run}/kernels?rank=0,1,2,3").json() == every


@pytest.mark.parametrize(("query", "message"), [
    ("rank=9", "no rank 9 in this run; ranks: 0, 1, 2, 3"), ("rank=abc", "comma-separated list of rank numbers"),
    ("rank=1,-2", "comma-separated"), ("rank=1,,2", "comma-separated"),
])
@pytest.mark.parametrize("route", ["ops", "kernels", "breakdown"])
def test_bad_rank_filters(rank_runs: dict[str, Any], route: str, query: str, message: str) -> None:
    r = rank_runs["client"].get(f"/api/runs/{rank_runs['straggler']}/{route}?{query}")
    assert r.status_code == 400 and message in r.json()["error"]["message"], r.text


def test_pages_filter_by_rank_and_link_the_ranks_page(rank_runs: dict[str, Any]) -> None:
    client, run = rank_runs["client"], rank_runs["straggler"]
    ops = client.get(f"/runs/{run}/ops?rank=2")
    assert ops.status_code == 200 and ops.context["page"].rank == "2"  # type: ignore[attr-defined]
    assert ops.context["page"].rows == client.get(f"/api/runs/{run}/ops?rank=2").json()["rows"]  # type: ignore[attr-defined]
    assert 'value="2" selected' in ops.text and 'id="tab-ranks"' in ops.text
    assert "rank=2" in ops.context["page"].sort_link("calls")  # type: ignore[attr-defined]
    kernels = client.get(f"/runs/{run}/kernels?rank=2")
    assert kernels.context["page"].rows == client.get(f"/api/runs/{run}/kernels?rank=2").json()["rows"]  # type: ignore[attr-defined]
    overview = client.get(f"/runs/{run}?rank=2")  # the breakdown and its gap table, of rank 2
    assert overview.context["page"].breakdown == client.get(f"/api/runs/{run}/breakdown?rank=2").json()  # type: ignore[attr-defined]
    assert overview.context["page"].breakdown != client.get(f"/api/runs/{run}/breakdown").json()  # type: ignore[attr-defined]
    assert 'value="2" selected' in overview.text and "of rank 2" in overview.text
    assert client.get(f"/runs/{run}?rank=9").status_code == 400
    single = client.get(f"/runs/{rank_runs['single']}/ops")
    assert 'id="tab-ranks"' not in single.text and 'id="rank-filter"' not in single.text
    page = client.get(f"/runs/{run}/ranks")
    assert page.status_code == 200
    assert page.context["page"].ranks == client.get(f"/api/runs/{run}/ranks").json()  # type: ignore[attr-defined]
    assert page.text.count('class="rank-row straggler"') == 1 and 'data-rank="2"' in page.text
    compare = client.get(f"/runs/{run}/ranks/compare")
    assert compare.status_code == 200 and "rank 2 against rank 0 (baseline)" in compare.text


@pytest.mark.shared
def test_real_sampled_pair_filtered_equals_rank_1_alone(tmp_path: Path, shared_traces: Path) -> None:
    base = shared_traces / HTA
    store = RunStore(tmp_path / "data")
    rank1 = base / "trace_filter/sampled_rank-1.json.gz"
    multi = ingest_paths(store, [base / "timeline_analysis/sampled_rank-0.json.gz", rank1]).id
    single = ingest_paths(store, [rank1]).id
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as client:
        _same_tables(client, multi, 1, single)
        assert [r["rank"] for r in client.get(f"/api/runs/{multi}/ranks").json()["ranks"]] == [0, 1]
