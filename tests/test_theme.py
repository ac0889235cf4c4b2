"""One colour table: static/theme.json is what the charts, the stylesheet and the scripts use.

The table is read here with json, independently of explorer.theme; each consumer is checked against it.
The browser side (TE.LANE_COLORS and the CSS custom properties as computed) is in tests/e2e/test_timeline_api.py.
"""

from __future__ import annotations

import json
import re

import pytest

from explorer.config import PROJECT_ROOT
from explorer.theme import load_theme
from explorer.views import charts
from explorer.views.render import make_environment

STATIC = PROJECT_ROOT / "static"
TABLE = json.loads((STATIC / "theme.json").read_text(encoding="utf-8"))
COLOR_LITERAL = re.compile(r"#[0-9a-fA-F]{3,8}\b|rgba?\(")
# the timeline's scripts: every colour they paint comes from TE.THEME
TIMELINE_SCRIPTS = ("timescale.js", "tracks.js", "lanes.js", "overlays.js", "gaps.js", "panels.js", "timeline_input.js", "timeline.js",
                    "timeline_api.js")


def test_python_charts_use_the_table() -> None:
    assert TABLE["lanes"] == charts.LANE_COLORS
    assert set(TABLE["lanes"]) == {"framework", "runtime", "hardware", "counter", "other"}


def test_stylesheet_defines_no_lane_colour_of_its_own() -> None:
    css = (STATIC / "css" / "app.css").read_text(encoding="utf-8")
    for lane in TABLE["lanes"]:
        assert not re.search(rf"--{lane}\s*:", css), f"app.css defines --{lane}"
    assert "var(--hardware)" in css  # it does use them


def test_pages_carry_the_table_as_css_properties_and_json() -> None:
    html = make_environment().from_string('{% extends "base.html" %}').render(
        base="", inline=None, page={"twin": ""}, readonly=False, needs_plotly=False, scripts=())
    for lane, color in TABLE["lanes"].items():
        assert f"--{lane}: {color};" in html
    block = re.search(r'<script type="application/json" id="te-theme">(.*?)</script>', html, re.S)
    assert block is not None and json.loads(block.group(1)) == TABLE


@pytest.mark.parametrize("script", TIMELINE_SCRIPTS)
def test_timeline_scripts_hold_no_colour_literal(script: str) -> None:
    text = (STATIC / "js" / script).read_text(encoding="utf-8")
    assert COLOR_LITERAL.findall(text) == []


def test_common_js_takes_lane_colours_from_the_page() -> None:
    text = (STATIC / "js" / "common.js").read_text(encoding="utf-8")
    assert 'TE.readJSON("te-theme")' in text
    assert COLOR_LITERAL.findall(text) == []


@pytest.mark.parametrize("value", ["red; } body { x: y", "url(javascript:1)", "#12", "</style>"])
def test_a_value_that_is_not_a_colour_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="not a colour"):
        load_theme(json.dumps({"lanes": {"framework": value}}))
