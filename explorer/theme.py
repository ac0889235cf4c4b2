"""The one colour table (static/theme.json): lane colours and the timeline's canvas colours.

Python charts read it here at import; pages get it as CSS custom properties (`--framework`, ...) and
as a JSON block the scripts read (TE.THEME). Nothing else writes a lane colour.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup

from explorer.config import asset_dir

THEME_PATH = asset_dir("static") / "theme.json"
_COLOR = re.compile(r"^(#[0-9a-fA-F]{3,8}|rgba?\([0-9., ]+\))$")


def load_theme(text: str) -> dict[str, dict[str, str]]:
    """The theme's sections, every value checked to be a colour (so it is inert inside CSS)."""
    raw: Any = json.loads(text)
    theme: dict[str, dict[str, str]] = {}
    for section, colors in raw.items():
        for key, value in colors.items():
            if not isinstance(value, str) or not _COLOR.match(value):
                raise ValueError(f"theme {section}.{key}: {value!r} is not a colour")
        theme[str(section)] = {str(k): str(v) for k, v in colors.items()}
    return theme


THEME = load_theme(THEME_PATH.read_text(encoding="utf-8"))
LANE_COLORS: dict[str, str] = THEME["lanes"]


def theme_css() -> Markup:
    """`:root { --framework: ...; }`: the lane colours as the CSS custom properties app.css uses."""
    return Markup(":root { " + " ".join(f"--{lane}: {color};" for lane, color in LANE_COLORS.items()) + " }")
