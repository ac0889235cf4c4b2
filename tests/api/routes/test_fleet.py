"""GET /api/fleet/ops and /fleet: one op's (or kernel's) time across the last N runs of a filter.

Runs are real ingests of bench/synth.py Kineto traces of different sizes, tagged at upload. Every number
is checked against the trace JSON read independently with Decimal (kernel durations in µs; an op's device
time is the kernels its launches correlate to) and against the run's own op / kernel table.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from explorer.errors import QueryRejected
from explorer.store.fleet_queries import _locked, _run
from tests.api.conftest import Uploader, assert_error

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from synth import write_kineto_trace  # noqa: E402

HOSTILE = "<script>alert('fleet')</script>"
# (run name, synthetic events, tags): nightly-4 doubles the work, so its linear time regresses
RUNS = (("nightly-1", 600, "nightly"), ("nightly-2", 660, "nightly"), ("other-1", 300, "other"),
        ("nightly-3", 606, "nightly"), ("nightly-4", 1200, "nightly,latest"))


def trace_bytes(tmp: Path, events: int, hostile: bool = False) -> bytes:
    path = tmp / f"t{events}.json"
    write_kineto_trace(path, events)
    text = path.read_text()
    return (text.replace('"aten::mul"', json.dumps(HOSTILE)) if hostile else text).encode()


def read_trace(data: bytes) -> dict[str, dict[str, tuple[int, int]]]:
    """Independently, from the JSON: per op name and per kernel name, (calls, total device ns). An op's
    device time: the kernels whose correlation id is launched by a runtime call inside the op's span on
    its thread (the synthetic trace has no other launches)."""
    events = json.loads(data, parse_float=Decimal)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    kernels = {e["args"]["correlation"]: e for e in spans if e["cat"] == "kernel"}
    out: dict[str, dict[str, list[int]]] = {"op": defaultdict(lambda: [0, 0]), "kernel": defaultdict(lambda: [0, 0])}
    for k in kernels.values():
        out["kernel"][k["name"]][0] += 1
        out["kernel"][k["name"]][1] += int(Decimal(k["dur"]) * 1000)
    launches = [e for e in spans if e["cat"] == "cuda_runtime"]
    for op in (e for e in spans if e["cat"] == "cpu_op"):
        row = out["op"][op["name"]]
        row[0] += 1
        for launch in launches:
            if launch["tid"] == op["tid"] and op["ts"] <= launch["ts"] <= op["ts"] + op["dur"]:
                row[1] += int(Decimal(kernels[launch["args"]["correlation"]]["dur"]) * 1000)
    return {kind: {n: (c, t) for n, (c, t) in rows.items()} for kind, rows in out.items()}


@pytest.fixture
def fleet(upload: Uploader, tmp_path: Path) -> list[dict[str, Any]]:
    """The runs, oldest first, each with its JSON and its independent reading."""
    out = []
    for name, events, tags in RUNS:
        data = trace_bytes(tmp_path, events, hostile=name == "nightly-2")
        run = upload(files=[(f"{name}.json", data)], name=name, tags=tags)
        assert run["status"] == "ready", run
        out.append({"run": run, "truth": read_trace(data), "name": name, "tags": tags.split(",")})
    return out


def median_low(values: list[int]) -> int:
    return sorted(values)[(len(values) - 1) // 2]


def expected_points(runs: list[dict[str, Any]], kind: str, name: str, max_pct: int = 5) -> list[dict[str, Any]]:
    """The series as a user would compute it by hand from the traces."""
    points, before = [], []
    for r in runs:
        calls, total = r["truth"][kind].get(name, (0, 0))
        med = median_low(before) if before else None
        verdict = "first"
        if med is not None:
            change = Fraction(total - med, med) if med else None
            verdict = ("regression" if (change is None and total > 0) or (change is not None and change > Fraction(max_pct, 100))
                       else "improvement" if change is not None and change < -Fraction(max_pct, 100) else "ok")
        points.append({"id": r["run"]["id"], "run": r["name"], "calls": calls, "total_ns": total,
                       "avg_ns": total // calls if calls else 0,
                       "delta_prev_ns": None if not before else total - before[-1],
                       "median_prev_ns": med, "verdict": verdict, "tags": sorted(r["tags"])})
        before.append(total)
    return points


def picked(body: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("id", "run", "calls", "total_ns", "avg_ns", "delta_prev_ns", "median_prev_ns", "verdict")
    return [{**{k: p[k] for k in keys}, "tags": sorted(p["tags"])} for p in body["runs"]]


def nightly(fleet: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in fleet if "nightly" in r["tags"]]


def test_op_series_equals_the_traces_and_flags_the_regression(client: TestClient, fleet: list[dict[str, Any]]) -> None:
    body = client.get("/api/fleet/ops", params={"name": "aten::linear", "tag": "nightly", "last": 30}).json()
    assert picked(body) == expected_points(nightly(fleet), "op", "aten::linear")
    # nightly-2 (10 % more units) and nightly-4 (twice the units) grew past 5 % of the median before them
    assert [p["verdict"] for p in body["runs"]] == ["first", "regression", "ok", "regression"]
    assert body["regressions"] == 2 and body["note"] == "" and body["runs_matched"] == 4
    last = body["runs"][-1]
    assert Decimal(last["pct_median"]).quantize(Decimal("0.001")) == (
        Decimal(100) * (last["total_ns"] - last["median_prev_ns"]) / last["median_prev_ns"]).quantize(Decimal("0.001"))
    # and the same number as each run's own op table
    for p in body["runs"]:
        rows = client.get(f"/api/runs/{p['id']}/ops", params={"q": "aten::linear"}).json()["rows"]
        row = next(r for r in rows if r["name"] == "aten::linear")
        assert (p["calls"], p["total_ns"]) == (row["calls"], row["device_total_ns"])


def test_kernel_series_equals_the_traces_and_the_kernel_tables(client: TestClient, fleet: list[dict[str, Any]]) -> None:
    name = "ampere_sgemm_128x64_tn"
    body = client.get("/api/fleet/ops", params={"name": name, "kind": "kernel", "tag": "nightly"}).json()
    assert picked(body) == expected_points(nightly(fleet), "kernel", name)
    for p in body["runs"]:
        row = next(r for r in client.get(f"/api/runs/{p['id']}/kernels").json()["rows"] if r["name"] == name)
        assert (p["calls"], p["total_ns"]) == (row["calls"], row["total_ns"])


@pytest.mark.parametrize(("params", "names"), [
    ({"tag": "nightly", "last": 2}, ["nightly-3", "nightly-4"]),
    ({"tag": "other"}, ["other-1"]),
    ({}, [n for n, _, _ in RUNS]),
    ({"run_name": "nightly", "last": 3}, ["nightly-2", "nightly-3", "nightly-4"]),
    ({"tag": "latest"}, ["nightly-4"]),
])
def test_filters_choose_the_runs(client: TestClient, fleet: list[dict[str, Any]], params: dict[str, Any],
                                 names: list[str]) -> None:
    body = client.get("/api/fleet/ops", params={"name": "aten::linear", **params}).json()
    chosen = [r for r in fleet if r["name"] in names]
    assert [p["run"] for p in body["runs"]] == names
    assert picked(body) == expected_points(chosen, "op", "aten::linear")


def test_suggestions_are_the_most_expensive_names_and_the_default(client: TestClient, fleet: list[dict[str, Any]]) -> None:
    runs = nightly(fleet)
    for kind in ("op", "kernel"):
        body = client.get("/api/fleet/ops", params={"kind": kind, "tag": "nightly"}).json()
        totals: dict[str, int] = defaultdict(int)
        for r in runs:
            for n, (_, t) in r["truth"][kind].items():
                totals[n] += t
        want = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:12]
        assert [(s["name"], s["total_ns"]) for s in body["suggestions"]] == want
        assert body["name"] == want[0][0]  # no name chosen: the most expensive one
        assert picked(body) == expected_points(runs, kind, want[0][0])


def test_unknown_name_is_an_empty_series_with_a_note(client: TestClient, fleet: list[dict[str, Any]]) -> None:
    r = client.get("/api/fleet/ops", params={"name": "aten::nope", "tag": "nightly"})
    assert r.status_code == 200
    body = r.json()
    assert body["runs"] == [] and body["regressions"] == 0 and body["suggestions"]
    assert body["note"] == "no op named 'aten::nope' in the 4 runs matched; pick one of the suggested names."
    none = client.get("/api/fleet/ops", params={"tag": "no-such-tag"}).json()
    assert none["runs"] == [] and none["note"] == "no ready run with tag 'no-such-tag'."


@pytest.mark.parametrize(("params", "status", "code"), [
    ({"last": 0}, 422, "validation"),
    ({"last": 1001}, 422, "validation"),
    ({"name": "x" * 1001}, 422, "validation"),
    ({"kind": "stream"}, 400, "bad_request"),
    ({"max_regression": "7"}, 400, "bad_request"),
])
def test_bad_parameters_are_one_line_errors(client: TestClient, run_id: str, params: dict[str, Any], status: int,
                                            code: str) -> None:
    assert_error(client.get("/api/fleet/ops", params=params), status, code)


def test_threshold_moves_the_verdict(client: TestClient, fleet: list[dict[str, Any]]) -> None:
    body = client.get("/api/fleet/ops", params={"name": "aten::linear", "tag": "nightly",
                                                "max_regression": "500%"}).json()
    assert body["max_regression_pct"] == 500.0 and body["regressions"] == 0
    assert picked(body) == expected_points(nightly(fleet), "op", "aten::linear", max_pct=500)


def test_page_holds_its_twin_and_escapes_hostile_names(client: TestClient, fleet: list[dict[str, Any]]) -> None:
    params = {"name": HOSTILE, "tag": "nightly"}
    resp = client.get("/fleet", params=params)
    assert resp.status_code == 200
    page = resp.context["page"]  # type: ignore[attr-defined]
    assert page.fleet == client.get("/api/fleet/ops", params=params).json()
    assert page.twin == "/api/fleet/ops?" + "name=%3Cscript%3Ealert%28%27fleet%27%29%3C%2Fscript%3E&tag=nightly"
    assert [p["calls"] for p in page.fleet["runs"]] == [0, nightly(fleet)[1]["truth"]["op"][HOSTILE][0], 0, 0]
    assert HOSTILE not in resp.text and "&lt;script&gt;alert(" in resp.text
    # suggestions carry the hostile name too (run nightly-2): escaped in the links' text
    assert "<script>alert" not in client.get("/fleet", params={"tag": "nightly", "last": 3}).text


def test_runs_page_links_the_fleet_page(client: TestClient) -> None:
    assert 'id="nav-fleet" href="/fleet"' in client.get("/").text


def test_the_query_reads_only_the_runs_files(client: TestClient, fleet: list[dict[str, Any]]) -> None:
    """The locked connection may open exactly the listed Parquet files: a path outside them is refused."""
    store = client.app.state.explorer.store  # type: ignore[attr-defined]
    path = str(store.table_path(fleet[0]["run"]["id"], "op_stats"))
    with _locked([path], 5.0) as con:
        assert _run(con, "select count(*) from read_parquet($f)", {"f": path}, 5.0)[0][0] > 0
        other = str(store.table_path(fleet[1]["run"]["id"], "op_stats"))
        with pytest.raises(QueryRejected, match="Permission"):
            _run(con, "select count(*) from read_parquet($f)", {"f": other}, 5.0)
