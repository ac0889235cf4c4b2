"""Browser test of the op table's views: the switch changes the rows (operators, then python frames),
keeps the other parameters, and module grouping appears for a trace with nn.Module frames."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FRAMES = Path(__file__).resolve().parents[1] / "fixtures" / "kineto_recursive_frames.json"
NAMES_JS = "tds => tds.map(td => td.textContent.trim())"


NAME_ONLY_JS = "tds => tds.map(td => td.firstChild.textContent.trim())"  # the name without its kind pill


def names_by_kind() -> tuple[set[str], set[str], set[str]]:
    """(operator names, python-frame-only names, launch frames: the innermost frames around a launch with no
    op around it, which the operators view lists too) read from the fixture itself."""
    events = [e for e in json.loads(FRAMES.read_text())["traceEvents"] if e.get("ph") == "X"]
    ops = {"cpu_op", "user_annotation", "python_function"}
    python = {e["name"] for e in events if e["cat"] == "python_function"}
    other = {e["name"] for e in events if e["cat"] in ops - {"python_function"}}

    def inside(e: dict[str, Any], call: dict[str, Any]) -> bool:
        return bool(e["ts"] <= call["ts"] and call["ts"] + call["dur"] <= e["ts"] + e["dur"])

    launch_frames = set()
    for call in (e for e in events if e["cat"] in ("cuda_runtime", "cuda_driver")):
        if not any(inside(e, call) for e in events if e["cat"] in ops - {"python_function"}):
            frames = [e for e in events if e["cat"] == "python_function" and inside(e, call)]
            launch_frames |= {max(frames, key=lambda e: e["ts"])["name"]} if frames else set()
    return other, python - other, launch_frames


def test_switch_op_views(page: Any, server: Any, shot: Any) -> None:
    from explorer.runs.ingest import ingest_paths

    run_id = ingest_paths(server.state.store, [FRAMES], "with_stack frames").id
    operators, python, launch_frames = names_by_kind()
    assert launch_frames  # the fixture has a kernel launched from a python frame with no op around it

    page.goto(f"{server.url}/runs/{run_id}/ops?q=a")
    page.wait_for_selector("#fig-ops .main-svg")
    assert page.get_attribute("#op-views a.on", "data-view") == "operators"
    shown = page.eval_on_selector_all("#ops-table tbody td.name", NAME_ONLY_JS)
    assert set(shown) == {n for n in operators | launch_frames if "a" in n.lower()}
    pills = page.eval_on_selector_all("#ops-table tbody td.name", "tds => tds.filter(td => td.querySelector('.pill'))"
                                      ".map(td => td.firstChild.textContent.trim())")
    assert set(pills) == {n for n in launch_frames if "a" in n.lower()}  # marked as Python frames
    assert "no launch linked" not in page.inner_text("#ops-device-note")  # every kernel is in some row
    self_dev = [int(v) for v in page.eval_on_selector_all(
        "#ops-table tbody td[data-v]:nth-child(7)", "tds => tds.map(td => td.dataset.v)")]
    assert self_dev == sorted(self_dev, reverse=True) and self_dev[0] > 0  # default: self device time
    assert "once per row" in (page.get_attribute("#ops-table th[data-col='device_total_ns']", "title") or "")
    shot(page, "ops-views-operators", full_page=True)

    page.click("#op-views a[data-view='python']")
    page.wait_for_url(re.compile(r"view=python"))
    assert page.get_attribute("#op-views a.on", "data-view") == "python"
    assert page.input_value("#ops-q") == "a"  # the filter survived the switch
    assert set(page.eval_on_selector_all("#ops-table tbody td.name", NAMES_JS)) == {
        n for n in python if "a" in n.lower()}
    assert page.get_attribute("#json-twin", "href").endswith("view=python")

    page.fill("#ops-q", "")
    page.press("#ops-q", "Enter")
    page.wait_for_url(re.compile(r"^(?!.*q=a).*view=python"))
    assert set(page.eval_on_selector_all("#ops-table tbody td.name", NAMES_JS)) == python
    page.check("#by-module")
    page.wait_for_url(re.compile(r"by_module=1"))
    modules = page.eval_on_selector_all("#ops-table tbody tr td:first-child", NAMES_JS)
    assert "Net_0/Linear_0" in modules and "Net_0" in modules
    page.wait_for_selector("#fig-ops .main-svg")
    shot(page, "ops-views-python-by-module", full_page=True)


def test_overview_charts_show_operators_and_launch_frames_only(page: Any, server: Any, shot: Any) -> None:
    from explorer.runs.ingest import ingest_paths

    run_id = ingest_paths(server.state.store, [FRAMES], "with_stack overview").id
    operators, python, launch_frames = names_by_kind()
    page.goto(f"{server.url}/runs/{run_id}")
    for fig in ("#fig-top-device", "#fig-top-cpu"):
        page.wait_for_selector(f"{fig} .main-svg")
        labels = set(page.eval_on_selector_all(f"{fig} .yaxislayer-above .ytick text", NAMES_JS))
        assert labels and labels <= operators | launch_frames, fig
        assert not labels & (python - launch_frames), fig
    shot(page, "ops-views-overview", full_page=True)


def test_launch_sites_marked_on_ops_and_overview(page: Any, server: Any, shot: Any, tmp_path: Path) -> None:
    """A flashinfer-like capture (tests/store/test_queries_op_attribution.py): the launching frame and the bare
    runtime call are rows of the operators view, marked, and the overview's top op is the launching frame."""
    from explorer.runs.ingest import ingest_paths
    from tests.store.test_queries_op_attribution import LAUNCH_FRAME, flashinfer_like

    path = flashinfer_like().write(tmp_path / "flashinfer_like.json")
    run_id = ingest_paths(server.state.store, [path], "flashinfer-like").id
    page.goto(f"{server.url}/runs/{run_id}/ops")
    page.wait_for_selector("#fig-ops .main-svg")
    pills = page.eval_on_selector_all("#ops-table tbody td.name .pill", "els => els.map(e => e.textContent)")
    assert sorted(pills) == ["launch", "py"]
    first = page.eval_on_selector_all("#ops-table tbody td.name", NAME_ONLY_JS)[0]
    assert first == LAUNCH_FRAME
    assert "no launch linked" in page.inner_text("#ops-device-note")
    page.wait_for_selector("#ops-table[data-live='1']")  # the browser now draws the rows (static/js/tables.js)
    page.click("#ops-table th[data-col='calls'] a")
    page.wait_for_url("**sort=-calls**")
    drawn = page.eval_on_selector_all("#ops-table tbody td.name .pill", "els => els.map(e => e.textContent)")
    assert sorted(drawn) == ["launch", "py"]  # the browser's rows mark them as the server's do
    shot(page, "ops-launch-sites", full_page=True)
    page.goto(f"{server.url}/runs/{run_id}")
    page.wait_for_selector("#fig-top-device .main-svg")
    assert LAUNCH_FRAME in page.inner_text("#top-device-sites")
    shot(page, "overview-launch-sites", full_page=True)
