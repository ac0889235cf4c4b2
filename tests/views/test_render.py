"""Pages compute once and render twice: each page's context equals its JSON twin; trace text is escaped
everywhere (HTML, embedded JSON, the offline report); every asset is local."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import PROJECT_ROOT, Settings
from explorer.report.html import build_report, render_report
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.views.compare import ComparePage
from explorer.views.ops import OpsPage
from explorer.views.overview import OverviewPage
from explorer.views.render import fmt_dur, fmt_ns, fmt_ratio, inline_plotly, json_for_script, make_environment
from explorer.views.runs import NotReadyPage, RunsPage
from explorer.views.timeline import TimelinePage
from tests.helpers.support import bench_module

HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
FRAMES = PROJECT_ROOT / "tests" / "fixtures" / "kineto_recursive_frames.json"  # with_stack + module frames


def hostile_trace(path: Path) -> Path:
    events = [{"ph": "X", "cat": "cpu_op", "name": HOSTILE[i % 2], "pid": 1, "tid": 2, "ts": i * 100, "dur": 50,
               "args": {"note": HOSTILE[0]}} for i in range(4)]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.fixture(scope="module")
def app_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("render")
    write_kineto_trace = bench_module("synth").write_kineto_trace
    write_kineto_trace(tmp / "big.json", 600)
    write_kineto_trace(tmp / "small.json", 240)
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    runs = {name: ingest_paths(store, [path], name).id for name, path in
            (("big", tmp / "big.json"), ("small", tmp / "small.json"),
             ("hostile", hostile_trace(tmp / "hostile.json")), ("frames", FRAMES))}
    with TestClient(app) as client:
        yield client, runs


def context(resp: Any) -> Any:
    assert resp.status_code == 200, resp.text[:500]
    return resp.context["page"]


# ---- compute once, render twice: the context is the twin's data ---------------------------------

def test_runs_page_context_is_the_run_list(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = app_runs
    page = context(client.get("/"))
    assert isinstance(page, RunsPage)
    assert page.runs == client.get(page.twin).json()["runs"]


def test_overview_context_matches_its_twins(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    resp = client.get(f"/runs/{runs['big']}")
    page = context(resp)
    assert isinstance(page, OverviewPage)
    assert page.run == client.get(page.twin).json()
    assert page.breakdown == client.get(f"/api/runs/{runs['big']}/breakdown").json()
    assert page.device_busy_pct is not None and 0 < page.device_busy_pct <= 100
    api = f"/api/runs/{runs['big']}/ops?view=operators"

    def op_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:  # the charts leave the rates out
        return [{k: v for k, v in r.items() if k != "work"} for r in rows]

    assert page.top_device == op_columns([r for r in client.get(f"{api}&sort=-self_device_ns").json()["rows"]
                                          if r["self_device_ns"] > 0][:15])
    assert page.top_cpu == op_columns(client.get(f"{api}&sort=-self_cpu_ns&limit=15").json()["rows"])
    assert f'href="{page.twin}"' in resp.text


@pytest.mark.parametrize("query", ["", "?sort=-calls", "?sort=%2Bname", "?sort=-self_cpu_ns&q=gelu",
                                   "?by_shape=1&sort=cpu_avg_ns", "?limit=3", "?view=all", "?view=python&q=x"])
def test_ops_context_equals_its_twin(app_runs: tuple[TestClient, dict[str, str]], query: str) -> None:
    client, runs = app_runs
    resp = client.get(f"/runs/{runs['big']}/ops{query}")
    page = context(resp)
    assert isinstance(page, OpsPage)
    twin = client.get(page.twin).json()
    assert page.rows == twin["rows"] and page.device_total_ns == twin["device_total_ns"]
    assert (page.view, page.sort, page.has_modules) == (twin["view"], twin["sort"], twin["has_modules"])
    assert page.twin.replace("&", "&amp;") in resp.text


def test_ops_sort_links_flip_the_sorted_column(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    page = context(client.get(f"/runs/{runs['big']}/ops?sort=-calls&q=aten"))
    assert page.sort_link("calls") == "?sort=%2Bcalls&q=aten"
    assert page.sort_link("name") == "?sort=%2Bname&q=aten"
    assert page.sort_link("device_pct") == "?sort=-device_pct&q=aten"
    assert page.view_link("python") == "?sort=-calls&q=aten&view=python"
    assert context(client.get(f"/runs/{runs['big']}/ops?view=all&by_shape=1")).view_link("operators") == (
        "?sort=-self_device_ns&by_shape=1")
    assert client.get(f"/runs/{runs['big']}/ops?sort=bogus").status_code == 400


@pytest.mark.parametrize("query", ["", "?view=python", "?view=all&by_module=1&sort=%2Bmodule",
                                   "?by_module=1&by_shape=1", "?view=python&sort=-cpu_total_ns&limit=2"])
def test_ops_views_context_equals_its_twin(app_runs: tuple[TestClient, dict[str, str]], query: str) -> None:
    client, runs = app_runs
    resp = client.get(f"/runs/{runs['frames']}/ops{query}")
    page = context(resp)
    twin = client.get(page.twin).json()
    assert page.rows == twin["rows"] and (page.view, page.sort) == (twin["view"], twin["sort"])
    assert page.has_modules and 'id="by-module"' in resp.text
    for view in page.views:  # the switch keeps the other parameters
        link = page.view_link(view)
        assert link.replace("&", "&amp;") in resp.text
        assert context(client.get(f"/runs/{runs['frames']}/ops{link}")).view == view


def test_ops_chart_follows_the_view_and_the_sort(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    cases = [("?view=python&sort=-cpu_total_ns", "cpu_total_ns"), ("?view=all&sort=%2Bself_cpu_ns", "self_cpu_ns"),
             ("?sort=-calls", "self_device_ns"), ("", "self_device_ns")]
    for query, metric in cases:
        page = context(client.get(f"/runs/{runs['frames']}/ops{query}"))
        top = sorted((r for r in page.rows if r[metric] > 0), key=lambda r: -r[metric])[:15]
        assert page.figure["data"][0]["y"] == [r["name"] for r in top], query
    by_module = context(client.get(f"/runs/{runs['frames']}/ops?view=python&by_module=1&sort=-cpu_total_ns"))
    labels = by_module.figure["data"][0]["y"]
    assert len(set(labels)) == len(labels)  # "f" under two modules: two bars, told apart by the module
    assert "Net_0/Linear_0: model.py(10): f" in labels and "Net_0: model.py(10): f" in labels
    big = context(client.get(f"/runs/{runs['big']}/ops"))
    assert not big.has_modules and 'id="by-module"' not in client.get(f"/runs/{runs['big']}/ops").text
    assert not context(client.get(f"/runs/{runs['big']}/ops?by_module=1")).by_module


def test_ops_view_must_be_known(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    assert client.get(f"/runs/{runs['frames']}/ops?view=kernels").status_code == 400


def test_compare_context_equals_its_twin(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    page = context(client.get(f"/compare?runs={runs['big']},{runs['small']}"))
    assert isinstance(page, ComparePage)
    assert page.compare == client.get(page.twin).json()
    totals = [r["device_total_ns"] for r in page.compare["runs"]]
    second = page.headline["secondary"]
    assert second is not None and second["metric"] == "device_total_ns" and second["totals_ns"] == totals
    assert second["pct_change"][1] == pytest.approx(100.0 * (totals[1] - totals[0]) / totals[0])
    assert page.headline["metric"] in ("step_ns", "span_ns")
    assert client.get(f"/compare?runs={runs['big']}").status_code == 400


def test_compare_with_a_chosen_baseline_equals_its_twin(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    resp = client.get(f"/compare?runs={runs['big']},{runs['small']}&baseline={runs['small']}")
    page = context(resp)
    assert page.twin == f"/api/compare?runs={runs['big']},{runs['small']}&baseline={runs['small']}"
    assert page.compare == client.get(page.twin).json()
    assert [r["id"] for r in page.compare["runs"]] == [runs["small"], runs["big"]]
    assert page.compare["baseline"] == {"id": runs["small"], "reason": "chosen", "tag": ""}
    assert page.baseline_link(runs["big"]) == f"/compare?runs={runs['big']},{runs['small']}&baseline={runs['big']}"
    assert page.twin.replace("&", "&amp;") in resp.text
    assert client.get(f"/compare?runs={runs['big']},{runs['small']}&baseline=nope").status_code == 400


def test_timeline_context(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    page = context(client.get(f"/runs/{runs['big']}/timeline"))
    assert isinstance(page, TimelinePage)
    assert page.span_ns == page.run["summary"]["span_ns"] > 0
    assert client.get(page.twin).status_code == 200


def test_not_ready_run_page_says_so(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = app_runs
    rec = client.app.state.explorer.store.catalog.create("pending <b>run</b>")  # type: ignore[attr-defined]
    # every page route of a run (PageRunDep: one handler renders the page, no check per route)
    for path in ("", "/timeline", "/ops", "/steps", "/kernels", "/collectives", "/sql", "/ranks", "/ranks/compare",
                 "/device/0"):
        resp = client.get(f"/runs/{rec.id}{path}")
        assert resp.status_code == 200 and "queued" in resp.text, path
        assert "pending &lt;b&gt;run&lt;/b&gt;" in resp.text
        assert isinstance(context(resp), NotReadyPage)


# ---- escaping --------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/runs/{id}", "/runs/{id}/ops", "/runs/{id}/ops?by_shape=1",
                                  "/runs/{id}/timeline", "/runs/{id}/report", "/compare?runs={id},{other}"])
def test_hostile_names_are_escaped_on_every_page(app_runs: tuple[TestClient, dict[str, str]], path: str) -> None:
    client, runs = app_runs
    html = client.get(path.format(id=runs["hostile"], other=runs["big"])).text
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    if "ops" in path:
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the table cell, as text


@pytest.mark.parametrize("value", [HOSTILE[0], "</script><script>alert(1)</script>", "<!--", "a\u2028b", "&amp;"])
def test_json_for_script_cannot_close_the_element(value: str) -> None:
    text = str(json_for_script({"k": [value]}))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"k": [value]}


def test_environment_autoescapes() -> None:
    env = make_environment()
    assert env.from_string("{{ x }}").render(x=HOSTILE[1]) == "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"


@pytest.mark.parametrize(("ns", "text"), [(0, "0 ns"), (999, "999 ns"), (1500, "1.500 µs"), (2_355_000, "2.355 ms"),
                                          (3_000_000_000, "3.000 s"), (None, "–"), (-1500, "-1.500 µs")])
def test_fmt_ns(ns: int | None, text: str) -> None:
    assert fmt_ns(ns) == text


@pytest.mark.parametrize(("ns", "signed", "text"), [
    (501_567_000, False, "501.6 ms"),  # the unit adapts: ms for 501,567 µs
    (2_355_000, False, "2,355.0 µs"), (10_000_000, False, "10.0 ms"), (12_345_000_000, False, "12.35 s"),
    (999, False, "999 ns"), (-1_500_000, True, "-1,500.0 µs"), (40_000_000, True, "+40.0 ms"), (0, True, "0 ns"),
    (None, False, "–"),
])
def test_fmt_dur_picks_the_unit_like_the_charts(ns: int | None, signed: bool, text: str) -> None:
    assert fmt_dur(ns, signed) == text


# ---- the report and assets --------------------------------------------------------------------------

def test_report_is_self_contained(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    store = client.app.state.explorer.store  # type: ignore[attr-defined]
    report = build_report(Run.of(store, runs["big"]))
    assert report.snapshot["window"]["width_px"] == 4000
    assert {t["track_id"] for t in report.snapshot["tracks"]["tracks"]} >= {
        t["track_id"] for t in report.snapshot["window"]["tracks"]}
    html = render_report(report)
    assert len(html) > 1_000_000  # plotly.js (the basic bundle) is inlined
    ours = html.replace(str(inline_plotly()), "")  # plotly.js holds URL strings it never fetches
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", ours)
    assert '<script src=' not in html and '<link rel="stylesheet"' not in html
    assert 'id="timeline-snapshot"' in html and "Plotly" in html
    served = client.get(f"/runs/{runs['big']}/report?download=1")
    assert served.headers["content-disposition"].startswith("attachment")
    assert 'id="json-twin"' not in served.text  # a file to keep links nothing back
    assert f'id="json-twin" href="/api/runs/{runs["big"]}"' in client.get(f"/runs/{runs['big']}/report").text


def test_share_link_serves_the_report_read_only(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    url = client.post(f"/api/runs/{runs['small']}/share").json()["url"]
    html = client.get(url).text
    assert "read-only" in html and 'id="timeline-snapshot"' in html
    assert f'href="/api{url}"' in html  # its twin: /api/s/{token}
    assert client.get("/s/not-a-real-token-123").status_code == 404


def test_assets_are_local() -> None:
    for folder in ("templates", "static"):
        for f in (PROJECT_ROOT / folder).rglob("*"):
            # static/vendor holds third-party bundles as published (their URL strings are never fetched:
            # the browser tests fail on any request to another host)
            if f.is_file() and f.suffix in (".html", ".js", ".css") and "vendor" not in f.parts:
                assert not re.search(r"https?://|//cdn|fonts\.googleapis", f.read_text()), f


def test_plotly_is_served_locally(app_runs: tuple[TestClient, dict[str, str]]) -> None:
    client, runs = app_runs
    html = client.get(f"/runs/{runs['big']}").text
    src = re.search(r'<script src="(/static/vendor/plotly-basic\.min\.js\?v=[0-9a-f]{16})">', html)
    assert src, "the overview loads plotly.js from this server, at its content-hashed URL"
    resp = client.get(src.group(1))
    assert resp.status_code == 200 and len(resp.content) > 1_000_000


def test_pages_work_behind_a_path_prefix(tmp_path: Path) -> None:
    # the prefix as the server passes it (uvicorn --root-path): scope["root_path"]
    app = create_app(Settings(data_dir=tmp_path / "data"))
    with TestClient(app, root_path="/te") as client:
        html = client.get("/").text
    assert re.search(r'href="/te/static/css/app\.css\?v=[0-9a-f]{16}"', html) and 'data-base="/te"' in html
    assert 'href="/te/api/runs"' in html


def test_ratio_filter_shows_a_fraction_of_one_as_percent() -> None:
    """Neuron Summary `*_percent` fields are fractions of 1 (a real export: 0.9740211517776104 active)."""
    assert fmt_ratio(0.9740211517776104) == "97.4 %"
    assert fmt_ratio(0) == "0.0 %" and fmt_ratio(None) == "–"
    assert fmt_ratio(0.715032 - 0.742206, signed=True) == "-2.7 pp"
    assert make_environment().from_string("{{ x|ratio }}").render(x=0.2112) == "21.1 %"
