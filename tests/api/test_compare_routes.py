"""/api/compare and /compare: the baseline (and why), the headline and the kernel diff, checked against
the uploaded files (Decimal µs -> ns); the page's context is its JSON twin and names the baseline."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal

from fastapi.testclient import TestClient

from explorer.views.compare import ComparePage
from explorer.views.render import fmt_dur
from tests.api.conftest import TINY, Uploader, assert_error

FASTER = (TINY.read_bytes().replace(b'"dur": 150.0', b'"dur": 50.0').replace(b'"aten::add"', b'"aten::sub"')
          .replace(b'"add_kernel"', b'"sub_kernel"'))


def kernels_of(data: bytes) -> dict[str, tuple[int, int]]:
    """Device executions by name from the file: (calls, total ns)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in json.loads(data, parse_float=Decimal)["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            out[e["name"]][0] += 1
            out[e["name"]][1] += int(Decimal(e["dur"]) * 1000)
    return {k: (c, n) for k, (c, n) in out.items()}


def median_step_of(data: bytes) -> int:
    """The lower median of the file's ProfilerStep#N durations, in ns."""
    durs = sorted(int(Decimal(e["dur"]) * 1000) for e in json.loads(data, parse_float=Decimal)["traceEvents"]
                  if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    return durs[(len(durs) - 1) // 2]


def two_runs(client: TestClient, upload: Uploader) -> tuple[str, str]:
    before = upload(name="before")["id"]
    after = upload(files=[("after.json", FASTER)], name="after")["id"]
    r = client.patch(f"/api/runs/{before}", json={"tags": ["before"]})
    assert r.status_code == 200, r.text
    return before, after


def test_api_compare_carries_baseline_headline_and_kernel_diff(client: TestClient, upload: Uploader) -> None:
    before, after = two_runs(client, upload)
    body = client.get(f"/api/compare?runs={after},{before}").json()  # listed second, but tagged "before"
    assert body["baseline"] == {"id": before, "reason": "tagged", "tag": "before"}
    assert [r["id"] for r in body["runs"]] == [before, after]
    truth = [kernels_of(TINY.read_bytes()), kernels_of(FASTER)]
    totals = [sum(n for _, n in t.values()) for t in truth]
    h = body["headline"]
    steps = [median_step_of(TINY.read_bytes()), median_step_of(FASTER)]  # one step each, equally long
    assert h["baseline"] == before and h["metric"] == "step_ns" and h["totals_ns"] == steps
    assert h["deltas_ns"] == [0, steps[1] - steps[0]] and h["pct_change"] == [0.0, 0.0]
    second = h["secondary"]  # summed device time: the second figure
    assert second["metric"] == "device_total_ns" and second["totals_ns"] == totals
    assert second["deltas_ns"] == [0, totals[1] - totals[0]]
    assert second["pct_change"][1] == 100 * (totals[1] - totals[0]) / totals[0]
    assert body["warnings"] == []  # one device model, one rank, one step each
    rows = {r["name"]: r for r in body["kernels"]["rows"]}
    assert set(rows) == set(truth[0]) | set(truth[1])
    assert rows["add_kernel"]["status"] == "removed" and rows["sub_kernel"]["status"] == "added"
    gemm = rows["gemm_kernel"]["vs_baseline"][0]
    assert gemm["status"] == "common" and gemm["total_ns"] == truth[1]["gemm_kernel"][1] - truth[0]["gemm_kernel"][1]
    assert rows["sub_kernel"]["vs_baseline"][0]["total_ns"] == truth[1]["sub_kernel"][1]


def test_an_explicit_baseline_beats_the_tag(client: TestClient, upload: Uploader) -> None:
    before, after = two_runs(client, upload)
    body = client.get(f"/api/compare?runs={before},{after}&baseline={after}").json()
    assert body["baseline"]["reason"] == "chosen" and [r["id"] for r in body["runs"]] == [after, before]
    fast, slow = (sum(n for _, n in kernels_of(data).values()) for data in (FASTER, TINY.read_bytes()))
    second = body["headline"]["secondary"]
    assert second["totals_ns"] == [fast, slow] and second["deltas_ns"] == [0, slow - fast]
    assert_error(client.get(f"/api/compare?runs={before},{after}&baseline=nope"), 400, "bad_request")
    assert_error(client.get(f"/api/compare?runs={before},{before}"), 400, "bad_request")


def test_compare_page_is_its_twin_and_names_the_baseline(client: TestClient, upload: Uploader) -> None:
    before, after = two_runs(client, upload)
    resp = client.get(f"/compare?runs={after},{before}")
    assert resp.status_code == 200, resp.text[:500]
    page = resp.context["page"]  # type: ignore[attr-defined]
    assert isinstance(page, ComparePage)
    assert page.compare == client.get(page.twin).json()
    assert page.headline == page.compare["headline"]
    html = resp.text
    note = html[html.index('id="baseline-note"'):]
    assert note[:note.index("</p>")].count("before") >= 2  # the baseline's name, and the tag that made it so
    totals = [sum(n for _, n in kernels_of(data).values()) for data in (TINY.read_bytes(), FASTER)]
    assert all(fmt_dur(t) in html for t in totals)
    assert f'id="swap-btn" href="/compare?runs={after},{before}&amp;baseline={after}"' in html
    assert 'id="kernel-table"' in html and "sub_kernel" in html
