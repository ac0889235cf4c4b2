"""The one Jinja environment, shared by the server's pages and the offline report, and its filters.

Autoescape is on for every template. Trace-derived strings are never marked safe; the only Markup
produced here is JSON made safe for a <script> element and the project's own static assets.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from explorer.config import asset_dir
from explorer.model.demo import demo_note
from explorer.theme import THEME, theme_css
from explorer.views.charts import time_unit

PLOTLY_JS = "vendor/plotly-basic.min.js"  # the bundle pages load (static/vendor/README.md says why this one)
PLOTLY_FULL_JS = "vendor/plotly.min.js"  # the installed plotly package's full bundle, served for old links
# Classic scripts (not ES modules) so the offline report can inline them as they are.
APP_SCRIPTS = ("js/common.js", "js/charts.js", "js/sources.js", "js/timescale.js", "js/tracks.js", "js/memory_tracks.js",
               "js/lanes.js", "js/overlays.js", "js/device_timeline.js", "js/gaps.js", "js/panels.js",
               "js/timeline_input.js", "js/timeline.js", "js/timeline_api.js", "js/tables.js",
               "js/pages.js")
APP_STYLES = ("css/app.css",)


def json_for_script(value: Any) -> Markup:
    """JSON text that can sit inside <script>: `<`, `>`, `&` and line separators are \\u-escaped,
    so neither `</script>` nor `<!--` can appear in it, whatever the trace contains."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return Markup(text)


def fmt_ns(ns: float | int | None, digits: int = 3) -> str:
    """A duration in the largest unit that keeps it >= 1 (edge formatting only)."""
    if ns is None:
        return "–"
    v = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.{digits}f} {unit}"
    return f"{v:,.0f} ns"


def fmt_us(ns: float | int | None) -> str:
    """Microseconds with one decimal, the unit torch's tables use."""
    return "–" if ns is None else f"{float(ns) / 1e3:,.1f} µs"


def fmt_dur(ns: float | int | None, signed: bool = False) -> str:
    """A duration in a unit that fits its size, as the charts choose theirs (charts.time_unit: µs up to
    10 ms, then ms, then s); under 1 µs in ns. `signed` puts + before positive values (deltas)."""
    if ns is None:
        return "–"
    v = float(ns)
    sign = "+" if signed and v > 0 else ""
    if abs(v) < 1e3:
        return f"{sign}{v:,.0f} ns"
    unit, scale = time_unit(abs(v))
    return f"{sign}{v / scale:,.{2 if unit == 's' else 1}f} {unit}"


def fmt_int(n: float | int | None) -> str:
    return "–" if n is None else f"{int(n):,}"


def fmt_pct(p: float | int | None, signed: bool = False) -> str:
    if p is None:
        return "–"
    return f"{float(p):+.1f} %" if signed else f"{float(p):.1f} %"


def fmt_ratio(r: float | int | None, signed: bool = False) -> str:
    """A fraction of 1 (a Neuron Summary `*_percent` field, as published) as a percent; a difference of
    two such fractions (`signed`) in percentage points."""
    if r is None:
        return "–"
    return f"{100 * float(r):+.1f} pp" if signed else f"{100 * float(r):.1f} %"


def fmt_time(epoch_s: float | None) -> str:
    if not epoch_s:
        return "–"
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M UTC")


# The pages' Content-Security-Policy (sent as a header by api/middleware/guard.py, and as a meta tag): everything
# from this server, nothing inline but styles; the self-contained report's: everything inline, no fetch.
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
            "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'")
REPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
              "font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
# Who may frame a page: this server, and VS Code's Simple Browser (a webview) — no other site.
FRAME_ANCESTORS = "'self' vscode-webview: vscode-file:"


class Assets:
    """The static files a server serves, each with a content hash computed once (when the server
    starts): `url(rel)` is `/static/rel?v=<hash>`, a URL the browser may cache for good, since a changed
    file gets a new one. `vendor/plotly.min.js` is the full plotly.js of the installed plotly package."""

    def __init__(self, static_dir: Path) -> None:
        self.static_dir = static_dir.resolve()
        self._digests: dict[str, str] = {}
        files = [p for p in self.static_dir.rglob("*") if p.is_file()] if self.static_dir.is_dir() else []
        for f in files:
            self._digests[f.relative_to(self.static_dir).as_posix()] = _digest(f)
        if plotly_js_path().is_file():
            self._digests[PLOTLY_FULL_JS] = _digest(plotly_js_path())

    def path(self, rel: str) -> Path | None:
        """The file behind `rel`; None for anything that is not one of the assets (`..` included)."""
        if rel not in self._digests:
            return None
        return plotly_js_path() if rel == PLOTLY_FULL_JS else self.static_dir / rel

    def digest(self, rel: str) -> str | None:
        return self._digests.get(rel)

    def url(self, rel: str) -> str:
        """The content-hashed URL of an asset (without the server's root path); a missing asset is a bug."""
        digest = self._digests.get(rel)
        if digest is None:
            raise KeyError(f"no static asset {rel!r} in {self.static_dir}")
        return f"/static/{rel}?v={digest}"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@lru_cache(maxsize=8)
def assets_for(static_dir: Path) -> Assets:
    """One Assets per static folder, shared by the environment (asset_url) and the static route."""
    return Assets(static_dir)


def make_environment(templates_dir: Path | None = None, static_dir: Path | None = None) -> jinja2.Environment:
    """The Jinja environment: autoescape on, undefined variables are errors, the formatting filters,
    and `asset_url(rel)`: the content-hashed URL of a static file (the server's pages link assets by it)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir or asset_dir("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(ns=fmt_ns, us=fmt_us, dur=fmt_dur, thousands=fmt_int, pct=fmt_pct, when=fmt_time, script_json=json_for_script)
    env.filters["ratio"] = fmt_ratio  # fractions of 1 as %: the Neuron Summary's `*_percent` fields
    env.globals["demo_note"] = demo_note  # the "what you are looking at" note of the demo's compare page
    env.globals.update(page_csp=PAGE_CSP, report_csp=REPORT_CSP)
    env.globals.update(theme=THEME, theme_css=theme_css)  # the one colour table, for CSS and the scripts
    env.globals.update(asset_url=assets_for(static_dir or asset_dir("static")).url, plotly_js=PLOTLY_JS)
    return env


@lru_cache(maxsize=8)
def _read_asset(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def inline_asset(static_dir: Path, rel: str) -> Markup:
    """One of the project's own static files, ready to sit inside <script> or <style>.
    `</` is broken up so the asset cannot close its element early."""
    text = _read_asset(str(static_dir / rel))
    return Markup(text.replace("</script", "<\\/script").replace("</style", "<\\/style").replace("<!--", "<\\!--"))


def plotly_js_path() -> Path:
    """plotly.min.js as shipped inside the installed `plotly` package (served at /static/vendor/)."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def inline_plotly(static_dir: Path | None = None) -> Markup:
    """The plotly.js bundle the pages load, for the offline report."""
    return inline_asset(static_dir or asset_dir("static"), PLOTLY_JS)
