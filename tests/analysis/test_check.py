"""The CI regression gate: `trace-explorer check` and GET /api/check on the demo's naive and compiled RMSNorm
runs (profiled on this CPU), with step times recomputed from the raw trace files in decimal arithmetic.

Which of the two is slower on a CPU is the machine's to say (torch.compile usually wins; a loaded shared box
has made it lose): the tests take `slow` and `fast` from the raw step times, so the gate is checked
against what the files hold, whichever way they went."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from api.app import create_app
from api.cli import main
from explorer.analysis.check import CheckSide, compute_check
from explorer.cli import check_markdown
from explorer.config import Settings
from explorer.model.demo import DEMO_TAG, RUN_NAMES
from explorer.store.runs import RunStore

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(demo_run: dict[str, Any]) -> dict[str, Any]:
    store = RunStore(demo_run["data"])
    runs = {r.name: r for r in store.catalog.list(tag=DEMO_TAG)[0]}
    if RUN_NAMES["compiled"] not in runs:
        pytest.skip("torch.compile is not usable here (no C++ compiler): no compiled run to check against")
    naive, compiled = runs[RUN_NAMES["naive"]], runs[RUN_NAMES["compiled"]]
    step = {r.id: raw_step_ns(raw_trace(store, r.id)) for r in (naive, compiled)}
    fast, slow = sorted(step, key=step.__getitem__)
    if step[slow] * 100 <= step[fast] * 110:
        pytest.skip(f"naive and compiled steps within 10 % of each other on this machine ({step}): no regression to find")
    return {"data": demo_run["data"], "store": store, "naive": naive.id, "compiled": compiled.id,
            "slow": slow, "fast": fast}


def check(data: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", *args, "--data-dir", str(data)], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def raw_trace(store: RunStore, run_id: str) -> Path:
    (art,) = store.get(run_id).summary.artifacts
    return store.run_dir(run_id) / "artifacts" / art.stored_as


def raw_step_ns(path: Path) -> int:
    """Mean ProfilerStep#N duration straight from the trace's decimal µs text: Σ dur × 1000 // steps."""
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    durs = [int(Decimal(e["dur"]) * 1000) for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    assert durs
    return sum(durs) // len(durs)


def verdict(row: dict[str, Any], limit_pct: int = 5) -> str:
    """The published rule, applied here to the row's own numbers."""
    base, cand = row["baseline_ns"], row["candidate_ns"]
    if cand * 100 > base * (100 + limit_pct):
        return "regression"
    return "improvement" if cand * 100 < base * (100 - limit_pct) else "ok"


def test_the_slower_run_as_candidate_regresses(demo: dict[str, Any]) -> None:
    code, out = check(demo["data"], demo["fast"], demo["slow"], "--json")
    assert code == 1, out
    result = json.loads(out)
    assert result["passed"] is False and result["baseline"]["id"] == demo["fast"]
    rows = {r["metric"]: r for r in result["rows"]}
    assert list(rows) == ["cpu_total", "step_time"]  # CPU only: no device time here
    step = rows["step_time"]
    assert step["baseline_ns"] == raw_step_ns(raw_trace(demo["store"], demo["fast"]))
    assert step["candidate_ns"] == raw_step_ns(raw_trace(demo["store"], demo["slow"]))
    assert step["delta_ns"] == step["candidate_ns"] - step["baseline_ns"] and step["verdict"] == "regression"
    assert all(r["verdict"] == verdict(r) for r in rows.values())
    assert result["regressions"] == sum(r["verdict"] == "regression" for r in rows.values())


def test_the_faster_run_as_candidate_passes(demo: dict[str, Any]) -> None:
    code, out = check(demo["data"], demo["slow"], demo["fast"], "--metric", "step_time")
    assert code == 0, out
    assert "improvement" in out and "regression" not in out.replace("no metric regressed", "")
    assert "ok: no metric regressed by more than 5%" in out


def test_numbers_equal_the_apis_run_data(demo: dict[str, Any]) -> None:
    code, out = check(demo["data"], demo["compiled"], demo["naive"], "--json", "--metric", "op:aten::mul",
                      "--metric", "cpu_total", "--metric", "device_total")
    assert code == 1
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    with TestClient(create_app(Settings(data_dir=demo["data"]))) as client:
        compare = client.get("/api/compare", params={"runs": f"{demo['compiled']},{demo['naive']}"}).json()
        ops = client.get(f"/api/runs/{demo['naive']}/ops", params={"q": "aten::mul"}).json()["rows"]
        summaries = [client.get(f"/api/runs/{demo[k]}").json()["summary"] for k in ("compiled", "naive")]
    host = compare["headline"]["secondary"]  # the headline is the step; host CPU time is its second figure
    assert host["metric"] == "cpu_total_ns"
    assert [rows["cpu_total"]["baseline_ns"], rows["cpu_total"]["candidate_ns"]] == host["totals_ns"]
    mul = next(r for r in ops if r["name"] == "aten::mul")
    assert rows["op:aten::mul"]["candidate_ns"] == mul["cpu_total_ns"] > 0  # host-only: the op's CPU total
    assert rows["op:aten::mul"]["baseline_ns"] == 0 and rows["op:aten::mul"]["pct_change"] is None  # fused away
    assert [rows["device_total"]["baseline_ns"], rows["device_total"]["candidate_ns"]] == [
        s.get("device", {}).get("device_total_ns", 0) for s in summaries]
    assert rows["device_total"]["verdict"] == "ok"


def test_api_check_gives_the_cli_rows(demo: dict[str, Any]) -> None:
    _, out = check(demo["data"], demo["compiled"], demo["naive"], "--json", "--max-regression", "0.10")
    with TestClient(create_app(Settings(data_dir=demo["data"]))) as client:
        response = client.get("/api/check", params={"baseline": demo["compiled"], "candidate": demo["naive"],
                                                    "max_regression": "0.10"})
        assert response.status_code == 200, response.text
        assert response.json() == json.loads(out)
        assert response.json()["max_regression_pct"] == 10.0
        for params, status, code in [
            ({"baseline": "rnope", "candidate": demo["naive"]}, 404, "run_not_found"),
            ({"baseline": "tag:no-such-tag@latest", "candidate": demo["naive"]}, 404, "run_not_found"),
            ({"baseline": demo["compiled"], "candidate": demo["naive"], "max_regression": "lots"}, 400, "bad_request"),
            ({"baseline": demo["compiled"], "candidate": demo["naive"], "metric": "op:no.such.op"}, 400, "bad_request"),
            ({"baseline": demo["compiled"], "candidate": demo["naive"], "metric": "speed"}, 400, "bad_request"),
            ({"baseline": demo["compiled"]}, 422, "validation"),
        ]:
            bad = client.get("/api/check", params=params)
            assert bad.status_code == status and bad.json()["error"]["code"] == code, (params, bad.text)


def test_markdown_summary_for_a_pr_comment(demo: dict[str, Any]) -> None:
    code, out = check(demo["data"], demo["fast"], demo["slow"], "--markdown", "--metric", "step_time")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "### Trace Explorer check: ❌ regression"
    table = [line for line in lines if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header == ["metric", "baseline", "candidate", "Δ", "Δ %", "verdict"]
    assert set(table[1].replace("|", "")) <= set("-: ")
    (row,) = [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in table[2:]]
    slow, fast = (raw_step_ns(raw_trace(demo["store"], demo[k])) for k in ("slow", "fast"))
    assert row["metric"] == "step\\_time" and row["verdict"] == "❌ regression"
    assert row["Δ %"] == f"{100 * (slow - fast) / fast:+.1f}%"
    assert row["candidate"] == f"{slow / 1e6:,.3f} ms"


def test_trace_paths_as_refs(demo: dict[str, Any], tmp_path: Path) -> None:
    slow, fast = (str(raw_trace(demo["store"], demo[k])) for k in ("slow", "fast"))
    before = len(demo["store"].catalog.list(limit=1000)[0])
    code, out = check(demo["data"], fast, slow, "--metric", "step_time")  # the stored runs' files: nothing ingested
    assert code == 1, out
    assert len(demo["store"].catalog.list(limit=1000)[0]) == before
    assert f"run {demo['slow']}" in out and f"run {demo['fast']}" in out
    fresh = tmp_path / "data"
    code, out = check(fresh, slow, fast, "--json", "--metric", "step_time")
    assert code == 0, out
    assert len(RunStore(fresh).catalog.list()[0]) == 2
    code, out = check(fresh, str(tmp_path / "missing.json"), fast)
    assert code == 2 and "no run with id" in out


def test_tag_refs(demo: dict[str, Any]) -> None:
    store = demo["store"]
    for key in ("naive", "compiled"):  # ingested in this order: compiled is the newest nightly
        store.catalog.set_tags(demo[key], [*store.get(demo[key]).tags, "nightly"])
    newest_is_slower = demo["compiled"] == demo["slow"]
    code, out = check(demo["data"], "tag:nightly@1", "tag:nightly@latest", "--json", "--metric", "step_time")
    assert code == int(newest_is_slower), out
    result = json.loads(out)
    assert (result["baseline"]["id"], result["candidate"]["id"]) == (demo["naive"], demo["compiled"])
    code, out = check(demo["data"], "tag:nightly", "tag:nightly@1", "--metric", "step_time")
    assert code == int(not newest_is_slower)
    code, out = check(demo["data"], "tag:nightly@2", "tag:nightly")
    assert code == 2 and "only 2 ready runs are tagged 'nightly'" in out
    code, out = check(demo["data"], "tag:", demo["naive"])
    assert code == 2


def test_markdown_keeps_hostile_names_inside_their_cells() -> None:
    hostile = "aten::<script>alert(1)</script>|x`y"
    result = compute_check(CheckSide("a", "run | one", 0, 10, op_cpu_ns={hostile: 100}),
                           CheckSide("b", "<img src=x>", 0, 10, op_cpu_ns={hostile: 300}),
                           [f"op:{hostile}"], Fraction(1, 20))
    text = check_markdown(result)
    (row,) = [line for line in text.splitlines() if line.startswith("| op:")]
    cells = re.split(r"(?<!\\)\|", row.strip("|"))
    assert len(cells) == 6 and "<script>" not in text and "<img src=x>" not in text  # every < and > escaped
    assert "**\\<img src=x\\>**" in text and "**run \\| one**" in text
    assert cells[0].strip() == "op:aten::\\<script\\>alert(1)\\</script\\>\\|x\\`y"
    assert cells[-1].strip() == "❌ regression"
