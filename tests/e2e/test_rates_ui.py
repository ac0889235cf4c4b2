"""End-to-end: the Achieved column of the ops and kernels pages (rates from the ops' shapes, % of the H100's peak)
reads the same when the server renders it and after the browser re-sorts the table from the JSON twin; the note
under the table names the peak's device. Screenshots for review."""

from __future__ import annotations

import json
from typing import Any
from urllib.request import urlopen

import pytest

from explorer.runs.ingest import ingest_paths
from tests.analysis.advice.builder import build
from tests.views.test_rates import H100, ops

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def h100_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = build(ops(), tmp_path_factory.mktemp("rates") / "h100.json", H100)
    return ingest_paths(server.state.store, [path], "rates-h100").id


def rate_text(v: int, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:.2f} {prefix}{unit}"
    return f"{v:.0f} {unit}"


def achieved(page: Any, table: str) -> dict[str, str]:
    """name -> the Achieved cell's text, for the rows on screen."""
    rows = page.eval_on_selector_all(
        f"{table} tbody tr", "trs => trs.map(tr => [(tr.querySelector('td.name, td.kname') || {}).textContent || '',"
        " (tr.querySelector('td.work') || {}).textContent || ''])")
    return {n.strip(): " ".join(w.split()) for n, w in rows}


@pytest.mark.parametrize(("page_name", "table", "sort_col", "suffix"),
                         [("ops", "#ops-table", "calls", ""), ("kernels", "#kernels-table", "calls", "_kernel")])
def test_achieved_column_reads_the_same_from_server_and_browser(page: Any, server: Any, shot: Any, h100_run: str,
                                                                page_name: str, table: str, sort_col: str,
                                                                suffix: str) -> None:
    page.goto(f"{server.url}/runs/{h100_run}/{page_name}")
    page.wait_for_selector(f"{table}[data-live='1']")
    served = achieved(page, table)
    with urlopen(f"{server.url}/api/runs/{h100_run}/{page_name}") as resp:
        api = {r["name"]: r["work"] for r in json.load(resp)["rows"]}
    mm = api[f"aten::mm{suffix}"]
    assert served[f"aten::mm{suffix}"].startswith(rate_text(mm["flop_per_s"], "FLOP/s"))
    assert f" · {mm['pct_of_peak']:.1f} %" in served[f"aten::mm{suffix}"] and "BF16/FP16 tensor" in served[f"aten::mm{suffix}"]
    mul = api[f"aten::mul{suffix}"]
    assert served[f"aten::mul{suffix}"].startswith(rate_text(mul["bytes_per_s"], "B/s"))
    assert served[f"aten::relu{suffix}"] == "–"
    note = page.inner_text(f"#{page_name}-rates-note")
    assert "H100 SXM" in note and H100 in note
    shot(page, f"rates-{page_name}-h100", full_page=True)

    page.click(f"{table} th[data-col='{sort_col}'] a")  # the browser redraws the rows from the JSON twin
    page.wait_for_url(f"**sort=-{sort_col}**")
    assert achieved(page, table) == served
