"""The timeline's level budget (static/js/lanes.js TE.lanes.levelBudget), run under Node with a case table
worked out by hand: the most levels N every slice track may show (deeper levels fold into one band) so that
the tracks fit the height; all levels when everything fits; MIN_LEVELS when nothing does."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from explorer.config import PROJECT_ROOT

ROW_H, BAND_H = 17, 16
# (levels per slice track, fixed px, available px, N): the arithmetic in each comment
CASES = [
    ([60, 1, 1], 200, 850, 35),   # 200 + 17 + 17 + 17N + 16 <= 850 -> 17N <= 600 -> 35 (36 would be 867)
    ([10, 1], 100, 1000, 10),     # all 11 levels take 287 px: nothing folds
    ([60, 60], 900, 850, 2),      # the fixed part alone is taller: the minimum
    ([1], 2000, 850, 1),          # never more levels than the track has
    ([40, 30], 100, 700, 16),     # 100 + 2 (17N + 16) <= 700 -> N <= 16.7
    ([5], 0, 85, 5),              # exactly fits: 5 x 17 = 85
    ([5], 0, 84, 4),              # one px short: 4 levels + the band = 84
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_level_budget_cases() -> None:
    script = ("global.window = {}; require(process.argv[1]);"
              "const cases = JSON.parse(process.argv[2]), [row, band] = JSON.parse(process.argv[3]);"
              "console.log(JSON.stringify(cases.map(([lv, fixed, avail]) => "
              "window.TE.lanes.levelBudget(lv, fixed, avail, row, band))));")
    out = subprocess.run(["node", "-e", script, str(PROJECT_ROOT / "static" / "js" / "lanes.js"),
                          json.dumps([c[:3] for c in CASES]), json.dumps([ROW_H, BAND_H])],
                         capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(out.stdout) == [c[3] for c in CASES]
