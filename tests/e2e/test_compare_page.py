"""The compare page in a browser: the run picked first is the baseline whatever the table's order, swap
and "make baseline" reload with the new baseline, every Δ column sorts by its own cells (the two-row
header's colspans), and the kernel tab shows the kernel diff."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.api.conftest import TINY

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FASTER = (TINY.read_bytes().replace(b'"dur": 150.0', b'"dur": 50.0').replace(b'"aten::add"', b'"aten::sub"')
          .replace(b'"add_kernel"', b'"sub_kernel"'))


def ingest(server: Any, tmp_path: Path, name: str, data: bytes) -> str:
    from explorer.runs.ingest import ingest_paths

    path = tmp_path / f"{name.replace(' ', '_')}.json"
    path.write_bytes(data)
    return str(ingest_paths(server.state.store, [path], name).id)


def device_total_ns(data: bytes) -> int:
    """Summed kernel time of a trace file, read exactly (Decimal µs)."""
    events = json.loads(data, parse_float=Decimal)["traceEvents"]
    return sum(int(Decimal(e["dur"]) * 1000) for e in events if e.get("cat") == "kernel")


def query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def column_values(page: Any, table: str, header: str) -> tuple[list[str], list[float | None]]:
    """(first-column text, data-v of the column whose lower header reads `header`) per body row. The
    column is found here from the header's own layout (group cells span their runs' columns)."""
    return page.evaluate("""([table, header]) => {
      const t = document.querySelector(table), [top, low] = t.tHead.rows;
      let col = 0;
      for (const th of top.cells) { if (th.rowSpan > 1) col += th.colSpan; else break; }
      for (const th of low.cells) { if (th.textContent.trim() === header) break; col++; }
      const rows = Array.from(t.tBodies[0].rows);
      return [rows.map((r) => r.cells[0].textContent.trim()),
              rows.map((r) => { const v = r.cells[col].dataset.v; return v === "" ? null : Number(v); })];
    }""", [table, header])


def test_pick_order_sets_the_baseline_swap_sort_and_kernels(page: Any, server: Any, tmp_path: Path,
                                                            shot: Any) -> None:
    b = ingest(server, tmp_path, "cmp run B", FASTER)
    a = ingest(server, tmp_path, "cmp run A", TINY.read_bytes())  # newer: listed above B
    page.goto(server.url + "/")
    page.wait_for_selector("body[data-init='1']")
    listed = page.eval_on_selector_all("#runs-table tr[data-run]", "(trs) => trs.map((t) => t.dataset.run)")
    assert listed.index(a) < listed.index(b)  # so the table's order would make A the baseline
    page.check(f"input.pick-run[value='{b}']")
    page.check(f"input.pick-run[value='{a}']")
    assert page.inner_text(f"tr[data-run='{b}'] .pick-order") == "baseline"
    assert page.inner_text(f"tr[data-run='{a}'] .pick-order") == "2"
    shot(page, "compare-01-runs-picked")
    page.click("#compare-btn")
    page.wait_for_url(re.compile(r"/compare\?runs="))
    assert query(page) == {"runs": [f"{b},{a}"], "baseline": [b]}
    page.wait_for_selector("#fig-compare .main-svg")
    assert page.inner_text("#baseline-note .baseline-name") == "cmp run B"
    api = page.evaluate("(u) => fetch(u).then((r) => r.json())", server.url + "/api/compare?" + urlparse(page.url).query)
    assert api["baseline"]["id"] == b and api["runs"][0]["id"] == b
    shot(page, "compare-02-baseline-B", full_page=True)

    page.click("#swap-btn")
    page.wait_for_url(re.compile(rf"baseline={a}"))
    assert query(page) == {"runs": [f"{a},{b}"], "baseline": [a]}
    assert page.inner_text("#baseline-note .baseline-name") == "cmp run A"
    api = page.evaluate("(u) => fetch(u).then((r) => r.json())", server.url + "/api/compare?" + urlparse(page.url).query)
    delta = {r["name"]: r["vs_baseline"][0]["device_total_ns"] for r in api["rows"]}
    self_delta = {r["name"]: r["vs_baseline"][0]["self_device_ns"] for r in api["rows"]}

    # the default order: largest |Δ self device| first
    names, _ = column_values(page, "#compare-table", "Δ self device")
    assert [abs(self_delta[n]) for n in names] == sorted((abs(v) for v in self_delta.values()), reverse=True)
    for header, truth in (("Δ device", delta), ("Δ self device", self_delta)):
        th = page.locator("#compare-table thead th", has_text=re.compile(rf"^{header}$"))
        th.click()  # descending
        names, values = column_values(page, "#compare-table", header)
        assert values == [truth[n] for n in names] and values == sorted(values, reverse=True), header
        th.click()  # ascending
        names, values = column_values(page, "#compare-table", header)
        assert values == [truth[n] for n in names] and values == sorted(values), header
    page.locator("#compare-table thead th", has_text=re.compile(r"^Δ device$")).click()
    shot(page, "compare-03-swapped-sorted-by-delta-device", full_page=True)

    page.click(".tab-btn[data-tab='kernels']")
    page.wait_for_selector("#kernel-table", state="visible")
    assert page.is_hidden("#compare-table")
    status = {r["name"]: r["vs_baseline"][0]["status"] for r in api["kernels"]["rows"]}
    assert status == {"gemm_kernel": "common", "mul_kernel": "common", "add_kernel": "removed", "sub_kernel": "added"}
    for name, st in status.items():
        assert page.locator("#kernel-table tbody tr", has_text=name).locator(".pill").inner_text() == st
    shot(page, "compare-04-kernels", full_page=True)


def test_make_baseline_among_three_runs(page: Any, server: Any, tmp_path: Path, shot: Any) -> None:
    ids = [ingest(server, tmp_path, f"three {n}", TINY.read_bytes() if n != "c" else FASTER) for n in "abc"]
    page.goto(f"{server.url}/compare?runs={','.join(ids)}")
    page.wait_for_selector("body[data-init='1']")
    assert page.inner_text("#baseline-note .baseline-name") == "three a"
    assert "first run in the link" in page.inner_text("#baseline-note")
    slow, fast = device_total_ns(TINY.read_bytes()), device_total_ns(FASTER)
    # the headline is the median step (the same 1 ms step in every run); summed device time is the second figure
    assert page.locator("#headline .pct").all_inner_texts() == ["+0.0 %", "+0.0 %"]
    assert page.locator("#headline .verdict").all_inner_texts() == ["same", "same"]
    assert page.locator("#headline-secondary .sec-pct").all_inner_texts() == ["+0.0 %", f"{100 * (fast - slow) / slow:+.1f} %"]
    page.click(f".make-baseline[data-run='{ids[2]}']")
    page.wait_for_url(re.compile(rf"baseline={ids[2]}"))
    assert query(page)["runs"] == [f"{ids[2]},{ids[0]},{ids[1]}"]
    assert page.inner_text("#baseline-note .baseline-name") == "three c"
    groups = page.locator("#compare-table thead tr").first.locator("th.group").all_inner_texts()
    assert [g.split()[0:2] for g in groups] == [["three", "c"], ["three", "a"], ["three", "b"]]
    shot(page, "compare-05-three-runs", full_page=True)
