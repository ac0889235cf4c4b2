"""A constructed 8-rank training run (tests/analysis/collectives/synthetic.StepPlan): rank 5 starts each step late and runs an
extra kernel, so it arrives last at every all_to_all; rank 1 starts first, waits longest and has the longest step.
Against a plain json + Decimal reading of the files: the Steps page has one row per (rank, step) with that rank's
own device time, summing to the Ranks page's numbers; the straggler is rank 5 (the Collectives page's last
arriver), never the victim; the gaps table names each gap's rank."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from tests.analysis.collectives.synthetic import EXTRA, StepPlan, write_step_run
from tests.ranks.truth import union

PLAN = StepPlan()


def ns(value: Any) -> int:
    return int(Decimal(str(value)) * 1000)


def read_truth(path: Path) -> dict[str, Any]:
    """One rank's file: its steps, its device kernels, the arrival (launch start) of each all_to_all."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in xs
                   if e["name"].startswith("ProfilerStep#"))
    kernels = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"], e["args"]["correlation"])
                     for e in xs if e["cat"] == "kernel")
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in xs if e["name"] == "cudaLaunchKernel"}
    arrivals = [launch[c] for _, _, name, c in kernels if name.startswith("nccl")]
    compute = [(a, b) for a, b, name, _ in kernels if not name.startswith("nccl")]
    every = [(a, b) for a, b, _, _ in kernels]
    rows = []
    for lo, hi, name in steps:
        c, busy = union(compute, lo, hi), union(every, lo, hi)
        rows.append({"name": name, "start": lo, "dur_ns": hi - lo, "compute_ns": c, "communication_ns": busy - c,
                     "idle_ns": hi - lo - busy})
    gaps = {(p[2], n[2], n[0] - p[1]) for p, n in zip(kernels, kernels[1:], strict=False) if n[0] > p[1]}
    return {"rank": doc["distributedInfo"]["rank"], "steps": rows, "arrivals": arrivals, "gaps": gaps}


def low_median(values: list[int]) -> int:
    return sorted(values)[(len(values) - 1) // 2]


def lateness(per_rank: list[list[int]]) -> list[int]:
    """Per rank, the lower median over occurrences of (its time - the lower median time over ranks)."""
    n = len(per_rank)
    late: list[list[int]] = [[] for _ in range(n)]
    for k in range(len(per_rank[0])):
        median = low_median([p[k] for p in per_rank])
        for r in range(n):
            late[r].append(per_rank[r][k] - median)
    return [low_median(v) for v in late]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    paths = write_step_run(tmp_path_factory.mktemp("late-starter"), PLAN)
    data = tmp_path_factory.mktemp("late-starter-data")
    run_id = ingest_paths(RunStore(data), paths).id
    with TestClient(create_app(Settings(data_dir=data))) as client:
        yield {"client": client, "id": run_id, "truth": [read_truth(p) for p in paths]}


def test_fixture_has_a_victim_and_a_late_starter(run: dict[str, Any]) -> None:
    """The shape the issue met: the victim has the longest steps and arrives first; rank 5 arrives last."""
    truth = run["truth"]
    step_time = [low_median([s["dur_ns"] for s in t["steps"]]) for t in truth]
    assert max(range(PLAN.world), key=lambda r: step_time[r]) == PLAN.victim_rank
    for k in range(PLAN.steps):
        arrivals = [t["arrivals"][k] for t in truth]
        assert arrivals.index(max(arrivals)) == PLAN.late_rank and arrivals.index(min(arrivals)) == PLAN.victim_rank


def test_steps_one_row_per_rank_and_step_with_its_own_device_time(run: dict[str, Any]) -> None:
    body = run["client"].get(f"/api/runs/{run['id']}/steps").json()
    truth = run["truth"]
    assert body["count"] == PLAN.world * PLAN.steps and body["ranks"] == list(range(PLAN.world))
    want = [(t["rank"], s) for t in truth for s in t["steps"]]
    assert [(r["rank"], r["name"]) for r in body["steps"]] == [(rank, s["name"]) for rank, s in want]
    origin = want[0][1]["start"] - body["steps"][0]["start"]
    for row, (_, s) in zip(body["steps"], want, strict=True):
        assert row["start"] + origin == s["start"]
        assert {k: row[k] for k in ("dur_ns", "compute_ns", "communication_ns", "idle_ns")} == \
            {k: s[k] for k in ("dur_ns", "compute_ns", "communication_ns", "idle_ns")}
    # rank 1's compute is its own 1300 µs a step, not the 8 ranks' together
    assert body["steps"][PLAN.steps * PLAN.victim_rank]["compute_ns"] == (1300 + 20 * PLAN.victim_rank) * 1000
    slowest = [max(range(PLAN.steps), key=lambda k, t=t: (t["steps"][k]["dur_ns"], -k)) for t in truth]
    assert body["slowest_by_rank"] == [r * PLAN.steps + k for r, k in enumerate(slowest)]
    durs = [s["dur_ns"] for _, s in want]
    assert body["slowest"] == durs.index(max(durs))


def test_steps_page_sums_equal_the_ranks_page(run: dict[str, Any]) -> None:
    client, run_id = run["client"], run["id"]
    steps = client.get(f"/api/runs/{run_id}/steps").json()["steps"]
    ranks = client.get(f"/api/runs/{run_id}/ranks").json()["ranks"]
    for row in ranks:
        mine = [s for s in steps if s["rank"] == row["rank"]]
        assert len(mine) == PLAN.steps
        assert row["compute_ns"] == sum(s["compute_ns"] for s in mine)
        assert row["exposed_comm_ns"] == sum(s["communication_ns"] for s in mine)
        assert row["idle_ns"] == sum(s["idle_ns"] for s in mine)
        assert row["window_ns"] == sum(s["dur_ns"] for s in mine)


def test_the_straggler_is_the_latest_arriver_not_the_victim(run: dict[str, Any]) -> None:
    client, run_id, truth = run["client"], run["id"], run["truth"]
    body = client.get(f"/api/runs/{run_id}/ranks").json()
    rows = body["ranks"]
    late = lateness([t["arrivals"] for t in truth])
    start_late = lateness([[s["start"] for s in t["steps"]] for t in truth])
    step_times = [low_median([s["dur_ns"] for s in t["steps"]]) for t in truth]
    median = low_median(step_times)
    assert [r["arrival_late_ns"] for r in rows] == [max(v, 0) for v in late]
    assert [r["step_start_late_ns"] for r in rows] == start_late
    expected = [r for r in range(PLAN.world) if 100 * max(late[r], start_late[r]) > 5 * median]
    assert body["stragglers"] == expected == [PLAN.late_rank]
    assert body["step_start_skew_ns"] == max(max(t["steps"][k]["start"] for t in truth)
                                             - min(t["steps"][k]["start"] for t in truth) for k in range(PLAN.steps))
    assert body["matched_steps"] == PLAN.steps and body["matched_collectives"] == PLAN.steps
    # the collectives page names the same rank as last to every all_to_all
    colls = client.get(f"/api/runs/{run_id}/collectives").json()["rows"]
    assert len(colls) == PLAN.steps and {c["last_arriver"] for c in colls} == {PLAN.late_rank}
    assert body["latest_arriver"] == PLAN.late_rank == body["stragglers"][0]
    last = rows[PLAN.late_rank]
    assert (last["last_arrivals"], last["matched_collectives"]) == (PLAN.steps, PLAN.steps)
    assert last["wait_caused_ns"] == sum(c["wait_ns"] for c in colls)
    # its cause: what it did before arriving, the extra kernel no other rank runs
    evidence = last["evidence"]
    assert (evidence["rule"], evidence["collective"], evidence["kind"], evidence["name"]) == \
        ("arrival", "alltoall", "kernel", EXTRA)
    assert evidence["excess_ns"] == PLAN.steps * PLAN.extra_us * 1000 and evidence["late_ns"] == late[PLAN.late_rank]
    assert not rows[PLAN.victim_rank]["straggler"]
    compare = client.get(f"/api/runs/{run_id}/ranks/compare").json()
    assert compare["a"] == PLAN.late_rank and compare["b"] != PLAN.victim_rank


def test_the_pages_show_it(run: dict[str, Any]) -> None:
    client, run_id = run["client"], run["id"]
    ranks = client.get(f"/runs/{run_id}/ranks").text
    assert f"latest arriver: rank {PLAN.late_rank}, last to {PLAN.steps} of" in " ".join(ranks.split())
    assert 'id="step-skew"' in ranks and "straggler" in ranks
    compare = client.get(f"/api/runs/{run_id}/ranks/compare").json()
    assert f"Compare rank {PLAN.late_rank} vs rank {compare['b']}</a>" in " ".join(ranks.split())
    steps = client.get(f"/runs/{run_id}/steps").text
    assert "<th class=\"num\">Rank</th>" in steps and steps.count('class="step-row') == PLAN.world * PLAN.steps
    assert steps.count("slowest of rank") == PLAN.world  # one pill per rank
    truth = run["truth"]
    durs = [(s["dur_ns"], -i, t["rank"], s["name"]) for i, (t, s) in
            enumerate((t, s) for t in truth for s in t["steps"])]
    _, _, rank, name = max(durs)
    assert re.search(rf'id="slowest-step"[^>]*>{re.escape(name)}</a> of rank {rank} ', steps)


def test_steps_figure_has_a_bar_per_rank_and_step(run: dict[str, Any]) -> None:
    client, run_id = run["client"], run["id"]
    from explorer.views.charts import make_steps_figure

    fig = make_steps_figure(client.get(f"/api/runs/{run_id}/steps").json())
    assert fig["layout"]["xaxis"]["type"] == "multicategory"
    names, labels = fig["data"][0]["x"]
    assert len(set(zip(names, labels, strict=True))) == PLAN.world * PLAN.steps
    assert labels[:PLAN.world] == [f"rank {r}" for r in range(PLAN.world)]  # step 0 of every rank side by side


def test_gaps_carry_their_rank(run: dict[str, Any]) -> None:
    client, run_id, truth = run["client"], run["id"], run["truth"]
    gaps = client.get(f"/api/runs/{run_id}/breakdown").json()["gaps"]["largest"]
    assert gaps
    for g in gaps:
        assert (g["before"]["name"], g["after"]["name"], g["dur_ns"]) in truth[g["rank"]]["gaps"]
    assert len({g["rank"] for g in gaps}) > 1
    page = client.get(f"/runs/{run_id}").text
    assert '<th class="num">Rank</th>' in page and page.count('class="num gap-rank"') == min(len(gaps), 6)


def test_the_report_and_share_link_carry_the_per_rank_steps(run: dict[str, Any]) -> None:
    """The offline report (and so a share link, which opens it) renders the same steps table."""
    client, run_id = run["client"], run["id"]
    html = client.get(f"/runs/{run_id}/report").text
    section = html[html.index('id="report-steps"'):]
    section = section[:section.index("</section>")]
    assert '<th class="num">Rank</th>' in section
    assert section.count('class="step-row') == PLAN.world * PLAN.steps
    ranks = [int(r) for r in re.findall(r'data-rank="(\d+)"', section)]
    assert ranks == [r for r in range(PLAN.world) for _ in range(PLAN.steps)]
