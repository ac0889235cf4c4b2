"""End-to-end: the op and kernel tables sort, filter and page in the browser from their JSON, without a
page load; the order is the API's, the cells read as the server renders them, the numbers are the raw
trace's. Pages without charts do not load plotly.js; pages with charts get it from the browser's cache
the second time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote
from urllib.request import urlopen

import pytest

from explorer.runs.ingest import ingest_paths
from explorer.views.tables import TABLE_PAGE_ROWS
from tests.helpers.wide_trace import (
    HOSTILE_OP,
    WIDE_OPS,
    expected_kernel_total_ns,
    expected_op_calls,
    write_wide_trace,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PAGE_ROWS = TABLE_PAGE_ROWS
PAGES = -(-WIDE_OPS // PAGE_ROWS)


@pytest.fixture(scope="module")
def wide(server: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    trace = write_wide_trace(tmp_path_factory.mktemp("wide") / "wide.json")
    return ingest_paths(server.state.store, [trace], "wide").id, trace


def api_rows(server: Any, path: str) -> list[dict[str, Any]]:
    with urlopen(server.url + path) as resp:
        rows: list[dict[str, Any]] = json.load(resp)["rows"]
    return rows


def open_live(page: Any, url: str, table: str) -> list[str]:
    """Open a table page, wait until the browser has taken the table over; returns the document requests
    the page makes from now on (a reload would add one)."""
    page.goto(url)
    page.wait_for_selector(f"{table}[data-live='1']")
    page.evaluate("() => { window.__noReload = 'still here'; }")
    documents: list[str] = []
    page.on("request", lambda r: documents.append(r.url) if r.resource_type == "document" else None)
    return documents


def names(page: Any, table: str) -> list[str]:
    cells = page.eval_on_selector_all(f"{table} tbody td.name, {table} tbody td.kname", "tds => tds.map(td => td.title || td.textContent)")
    return list(cells)


def cells(page: Any, table: str) -> list[list[str]]:
    return list(page.eval_on_selector_all(f"{table} tbody tr", "trs => trs.map(tr => Array.from(tr.cells, c => c.textContent.trim()))"))


def assert_not_reloaded(page: Any, documents: list[str]) -> None:
    assert page.evaluate("() => window.__noReload") == "still here"
    assert documents == [], f"the page loaded again: {documents}"


def test_op_table_sorts_in_the_browser_in_the_apis_order(page: Any, server: Any, wide: tuple[str, Path]) -> None:
    run_id, trace = wide
    documents = open_live(page, f"{server.url}/runs/{run_id}/ops", "#ops-table")
    page.click("#ops-table th[data-col='calls'] a")
    page.wait_for_url("**sort=-calls**")
    api = api_rows(server, f"/api/runs/{run_id}/ops?sort=-calls")
    assert names(page, "#ops-table") == [r["name"] for r in api[:PAGE_ROWS]]
    calls = expected_op_calls(trace)
    shown = page.eval_on_selector_all("#ops-table tbody tr", "trs => trs.map(tr => [tr.cells[0].title, tr.cells[1].textContent])")
    assert all(int(c.replace(",", "")) == calls[n] for n, c in shown)  # the raw trace's counts
    assert page.inner_text("#ops-table th[data-col='calls']").endswith("▼")

    page.click("#ops-table th[data-col='calls'] a")  # the sorted column flips
    page.wait_for_url("**sort=%2Bcalls**")
    api = api_rows(server, f"/api/runs/{run_id}/ops?sort=%2Bcalls")
    assert names(page, "#ops-table") == [r["name"] for r in api[:PAGE_ROWS]]
    page.click("#ops-table th[data-col='name'] a")  # text ascends first, as the server's rule says
    page.wait_for_url("**sort=%2Bname**")
    assert names(page, "#ops-table") == sorted(calls)[:PAGE_ROWS]
    assert page.get_attribute("#json-twin", "href").endswith(f"/api/runs/{run_id}/ops?sort=%2Bname")
    assert_not_reloaded(page, documents)


def test_op_table_pages_and_filters_without_reloading(page: Any, server: Any, wide: tuple[str, Path]) -> None:
    run_id, _ = wide
    documents = open_live(page, f"{server.url}/runs/{run_id}/ops?sort=-self_cpu_ns", "#ops-table")
    api = [r["name"] for r in api_rows(server, f"/api/runs/{run_id}/ops?sort=-self_cpu_ns")]
    assert len(api) == WIDE_OPS
    n = PAGE_ROWS
    assert page.inner_text("#ops-pager .where") == f"rows 1–{n} of {WIDE_OPS} · page 1 of {PAGES}"
    page.click("#ops-pager a.next")
    page.wait_for_url("**page=2**")
    assert names(page, "#ops-table") == api[n:2 * n]
    assert page.inner_text("#ops-pager .where") == f"rows {n + 1}–{2 * n} of {WIDE_OPS} · page 2 of {PAGES}"
    for _ in range(PAGES - 2):
        page.click("#ops-pager a.next")
    assert names(page, "#ops-table") == api[(PAGES - 1) * n:] and page.locator("#ops-pager a.next").count() == 0
    page.click("#ops-pager a.prev")
    assert names(page, "#ops-table") == api[(PAGES - 2) * n:(PAGES - 1) * n]

    page.fill("#ops-q", "wide_01")
    page.wait_for_url("**q=wide_01**")
    filtered = [r["name"] for r in api_rows(server, f"/api/runs/{run_id}/ops?sort=-self_cpu_ns&q=wide_01")]
    assert len(filtered) == 100 and names(page, "#ops-table") == filtered
    assert page.inner_text("#ops-count") == "100" and page.is_hidden("#ops-pager")
    assert "page=" not in page.url
    assert_not_reloaded(page, documents)

    # the address is shareable: loaded afresh, the server renders the same rows (no script needed)
    page.goto(f"{server.url}/runs/{run_id}/ops?sort=-self_cpu_ns&page=3")
    page.wait_for_selector("#ops-table[data-live='1']")
    assert names(page, "#ops-table") == api[2 * n:3 * n]


def test_a_click_before_the_rows_arrive_goes_to_the_server_never_to_an_empty_table(page: Any, server: Any,
                                                                                  wide: tuple[str, Path]) -> None:
    """The browser takes a table over once its rows have come (a big run's take a moment). A header or pager
    clicked before then is a plain link: the server renders that page sorted, instead of the browser drawing
    an empty table under the new address (as it did: "No rows." until the rows came)."""
    run_id, trace = wide
    held: list[Any] = []  # the table's requests for its rows, answered only when the test says

    def hold(route: Any) -> None:
        held.append(route)

    page.route("**/api/runs/*/ops*", hold)
    page.goto(f"{server.url}/runs/{run_id}/ops")
    page.wait_for_function("() => document.readyState === 'complete'")
    while not held:
        page.wait_for_timeout(20)
    page.click("#ops-table th[data-col='calls'] a")
    page.wait_for_url("**sort=-calls**")
    api = [r["name"] for r in api_rows(server, f"/api/runs/{run_id}/ops?sort=-calls")]
    assert names(page, "#ops-table") == api[:PAGE_ROWS]  # the server's page, sorted
    page.click("#ops-pager a.next")
    page.wait_for_url("**page=2**")
    assert names(page, "#ops-table") == api[PAGE_ROWS:2 * PAGE_ROWS]
    assert page.get_attribute("#ops-table", "data-live") == ""  # still the server's table

    page.unroute("**/api/runs/*/ops*")
    held[-1].continue_()  # this page's request: now the browser takes the table over, on the same rows
    page.wait_for_selector("#ops-table[data-live='1']")
    assert names(page, "#ops-table") == api[PAGE_ROWS:2 * PAGE_ROWS]
    assert page.inner_text("#ops-pager .where").startswith(f"rows {PAGE_ROWS + 1}–")
    calls = expected_op_calls(trace)
    assert [calls[n] for n in names(page, "#ops-table")] == sorted(
        (calls[n] for n in names(page, "#ops-table")), reverse=True)


def test_rows_drawn_in_the_browser_read_as_the_server_renders_them(page: Any, browser: Any, server: Any,
                                                                    wide: tuple[str, Path]) -> None:
    run_id, trace = wide
    no_script = browser.new_context(java_script_enabled=False)  # the server's own rows, as without scripts
    try:
        for path, table in (("ops", "#ops-table"), ("kernels", "#kernels-table")):
            plain = no_script.new_page()
            plain.goto(f"{server.url}/runs/{run_id}/{path}?sort=%2Bname&page=2")
            server_cells = cells(plain, table)
            page.goto(f"{server.url}/runs/{run_id}/{path}")
            page.wait_for_selector(f"{table}[data-live='1']")
            page.click(f"{table} th[data-col='name'] a")
            page.click(f"#{path}-pager a.next")
            assert len(server_cells) == PAGE_ROWS and cells(page, table) == server_cells
    finally:
        no_script.close()
    totals = expected_kernel_total_ns(trace)
    shown = page.eval_on_selector_all("#kernels-table tbody tr",
                                      "trs => trs.map(tr => [tr.cells[0].textContent, tr.cells[3].textContent])")
    assert shown and all(text == f"{totals[name] / 1e3:,.1f} µs" for name, text in shown)


def test_hostile_op_name_is_text(page: Any, server: Any, wide: tuple[str, Path]) -> None:
    run_id, _ = wide
    open_live(page, f"{server.url}/runs/{run_id}/ops", "#ops-table")
    page.fill("#ops-q", "script")
    page.wait_for_url("**q=script**")
    assert names(page, "#ops-table") == [HOSTILE_OP]
    assert page.locator("#ops-table tbody script").count() == 0  # the guard fails the test on a dialog


def test_kernel_table_sorts_pages_and_filters_in_the_browser(page: Any, server: Any, wide: tuple[str, Path]) -> None:
    run_id, _ = wide
    documents = open_live(page, f"{server.url}/runs/{run_id}/kernels", "#kernels-table")
    page.click("#kernels-table th[data-col='p95_ns'] a")
    page.wait_for_url("**sort=-p95_ns**")
    api = [r["name"] for r in api_rows(server, f"/api/runs/{run_id}/kernels?sort=-p95_ns")]
    assert len(api) == WIDE_OPS and names(page, "#kernels-table") == api[:PAGE_ROWS]
    page.click("#kernels-pager a.next")
    assert names(page, "#kernels-table") == api[PAGE_ROWS:2 * PAGE_ROWS]
    page.fill("#kernels-q", "kernel_00")
    page.wait_for_url("**q=kernel_00**")
    filtered = [r["name"] for r in api_rows(server, f"/api/runs/{run_id}/kernels?sort=-p95_ns&q=kernel_00")]
    assert len(filtered) == 100 and names(page, "#kernels-table") == filtered
    assert page.inner_text("#kernels-count") == "100 kernels"
    assert_not_reloaded(page, documents)


def test_plotly_loads_only_on_pages_with_charts_and_comes_from_the_cache(browser: Any, server: Any,
                                                                      wide: tuple[str, Path]) -> None:
    run_id, _ = wide
    # a context without the guard's request routing: routing turns the browser's HTTP cache off
    context = browser.new_context()
    try:
        page = context.new_page()
        scripts: list[str] = []
        page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
        for path in ("/", f"/runs/{run_id}/timeline"):
            scripts.clear()
            page.goto(server.url + path)
            page.wait_for_selector("body[data-init='1']", state="attached")
            assert scripts and not [s for s in scripts if "plotly" in s], path
            assert page.evaluate("() => typeof window.Plotly") == "undefined"
        page.goto(f"{server.url}/runs/{run_id}/ops")
        page.wait_for_selector("#fig-ops .main-svg")
        plotly = [s for s in scripts if "plotly" in s]
        assert len(plotly) == 1 and "/static/vendor/plotly-basic.min.js?v=" in plotly[0]
        page.goto(f"{server.url}/runs/{run_id}/kernels")  # the same URL again: from the cache, no transfer
        page.wait_for_selector("#fig-kernels .main-svg")
        sizes = page.evaluate("() => performance.getEntriesByType('resource').map(e => [e.name, e.transferSize])")
        assert dict(sizes)[plotly[0]] == 0, "plotly.js came over the network again"
        assert all(size == 0 for name, size in sizes if "/static/" in name), sizes  # every asset cached
        assert all(s.startswith(server.url) for s in scripts)
    finally:
        context.close()


def test_rows_equal_in_the_sort_column_order_as_the_apis(page: Any, server: Any) -> None:
    """Grouped by input shape, one op has several rows: equal counts order by name, then shape, both sides."""
    run_id = server.runs["synth"]
    open_live(page, f"{server.url}/runs/{run_id}/ops?by_shape=1", "#ops-table")
    for sort in ("-calls", "+self_device_ns", "-input_shapes"):
        page.click(f"#ops-table th[data-col='{sort[1:]}'] a")
        if f"sort={quote(sort)}" not in page.url:  # the first click went the other way
            page.click(f"#ops-table th[data-col='{sort[1:]}'] a")
        assert f"sort={quote(sort)}" in page.url
        api = api_rows(server, f"/api/runs/{run_id}/ops?by_shape=1&sort={quote(sort)}")
        shown = page.eval_on_selector_all("#ops-table tbody tr",
                                          "trs => trs.map(tr => [tr.cells[0].title, tr.cells[1].textContent])")
        assert shown == [[r["name"], r["input_shapes"]] for r in api][:PAGE_ROWS], sort
        assert len({r["name"] for r in api}) < len(api)  # there are ties on name to break
