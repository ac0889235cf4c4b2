"""End-to-end: the kernels page in a browser on a synthetic Kineto trace (long C++ names, NCCL, memcpy,
memset, a hostile kernel name): charts draw, a column sorts, the filter and the category selector cut
the table, the host-only empty state; screenshots for review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from tests.helpers.kernel_trace import MUL_KERNEL, host_only_trace, write_kernel_trace

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NCCL = "HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz"


@pytest.fixture(scope="module")
def kernel_runs(server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("kernel-traces")
    store = server.state.store
    return {"gpu": ingest_paths(store, [write_kernel_trace(tmp / "kernels.json")], "kernels").id,
            "host": ingest_paths(store, [host_only_trace(tmp / "host.json")], "host only").id}


def column(page: Any, index: int) -> list[str]:
    return list(page.eval_on_selector_all(f"#kernels-table tbody td:nth-child({index})",
                                          "tds => tds.map(td => td.dataset.v ?? td.textContent)"))


def test_kernels_page_sorts_filters_and_draws(page: Any, server: Any, kernel_runs: dict[str, str], shot: Any) -> None:
    page.goto(f"{server.url}/runs/{kernel_runs['gpu']}/kernels")
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#fig-kernels .main-svg")
    page.wait_for_selector("#fig-kernel-categories .main-svg")
    assert page.locator("#kernels-table tbody tr").count() == 8
    assert page.get_attribute("#tab-kernels", "class") == "on"
    assert MUL_KERNEL in page.inner_text("#kernels-table")  # the whole C++ name, not cut
    totals = [int(v) for v in column(page, 4)]
    assert totals == sorted(totals, reverse=True)
    shot(page, "kernels-page", full_page=True)

    page.click("#kernels-table th[data-col='calls'] a")
    page.wait_for_url("**sort=-calls**")
    page.click("#kernels-table th[data-col='p95_ns'] a")
    page.wait_for_url("**sort=-p95_ns**")
    p95 = [int(v) for v in column(page, 9)]
    assert p95 == sorted(p95, reverse=True) and len(p95) == 8
    page.click("#kernels-table th[data-col='p95_ns'] a")  # the sorted column flips
    page.wait_for_url("**sort=%2Bp95_ns**")
    assert [int(v) for v in column(page, 9)] == sorted(p95)

    page.fill("#kernels-q", "memcpy")
    page.press("#kernels-q", "Enter")
    page.wait_for_url("**q=memcpy**")
    assert sorted(column(page, 2)) == ["memcpy DtoH", "memcpy HtoD"]
    page.fill("#kernels-q", "")
    page.select_option("#kernels-category", "communication")  # submits on change
    page.wait_for_url("**category=communication**")
    assert column(page, 2) == ["communication"]
    assert "ncclKernel_AllReduce" in page.inner_text("#kernels-table")
    twin = page.get_attribute("#json-twin", "href")
    assert twin is not None and "/api/runs/" in twin and "category=communication" in twin
    shot(page, "kernels-page-communication")


def test_kernels_page_host_only_empty_state(page: Any, server: Any, kernel_runs: dict[str, str], shot: Any) -> None:
    page.goto(f"{server.url}/runs/{kernel_runs['host']}/kernels")
    page.wait_for_selector("body[data-init='1']")
    assert "No device executions" in page.inner_text("#kernels-empty")
    assert page.locator("#kernels-table").count() == 0
    shot(page, "kernels-page-host-only")


@pytest.mark.shared
def test_kernels_page_on_a_real_nccl_trace(page: Any, server: Any, shared_traces: Path, shot: Any) -> None:
    run_id = ingest_paths(server.state.store, [shared_traces / NCCL], "nccl_data").id
    page.goto(f"{server.url}/runs/{run_id}/kernels")
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#fig-kernels .main-svg")
    assert page.locator("#kernels-table tbody tr").count() > 30
    assert "communication" in column(page, 2)
    shot(page, "kernels-page-nccl")


def test_report_kernel_table_sorts_and_filters_offline(offline_page: Any, server: Any, kernel_runs: dict[str, str],
                                                       tmp_path: Path, shot: Any) -> None:
    from explorer.report.html import build_report, render_report

    report = tmp_path / "report.html"
    report.write_text(render_report(build_report(Run.of(server.state.store, kernel_runs["gpu"]))), encoding="utf-8")
    page = offline_page
    page.goto(report.as_uri())
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#report-kernels #fig-kernels .main-svg")
    assert page.locator("#kernels-table tbody tr").count() == 8
    page.click("#kernels-table th[data-col='calls']")
    page.click("#kernels-table th[data-col='min_ns']")
    mins = [int(v) for v in column(page, 6)]
    assert mins == sorted(mins, reverse=True)
    page.fill("#kernels-filter", "memset")
    visible = page.eval_on_selector_all("#kernels-table tbody tr",
                                        "trs => trs.filter(t => t.style.display !== 'none').length")
    assert visible == 1
    page.locator("#report-kernels").scroll_into_view_if_needed()
    shot(page, "kernels-report-section")


def test_timeline_labels_kernels_by_their_bare_name(page: Any, server: Any, kernel_runs: dict[str, str],
                                                    shot: Any) -> None:
    page.goto(f"{server.url}/runs/{kernel_runs['gpu']}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.evaluate("name => TE.shortName(name)", MUL_KERNEL) == "vectorized_elementwise_kernel"
    shot(page, "kernels-timeline-labels")
