"""The rows of a with_stack slice track (static/js/tracks.js SliceTrack), run under Node with a case table worked
out by hand: the Python frames fold into row 0 and the other slices sit in rows `1 + fold key` below it; the
level budget then folds rows past it into the "+k levels" band; the opened stack draws every depth."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from explorer.config import PROJECT_ROOT

TRACK = {"track_id": 1, "kind": "slice", "lane": "framework", "max_depth": 26}  # 27 depths
FOLD = {"py": 25, "ops": 5}  # 25 Python levels; 5 op rows with the frames folded
# (opts, [levels, height, python, pyFolded], [(depth, fold) -> [row, hides]]): ROW_H 17, BAND_H 16
CASES = [
    # folded: the band and 5 op rows fit a budget of 30; a frame in row 0 (a fold), an op at key 2 in row 3
    ({"levels": 30, "fold": FOLD}, [6, 102, 25, True], [[10, -3, 0, True], [12, 2, 3, False], [3, 0, 1, False]]),
    # a budget of 3: the band and 2 op rows, then the "+3 levels" band (3 x 17 + 16)
    ({"levels": 3, "fold": FOLD}, [3, 67, 25, True], [[12, 2, 3, True], [12, 1, 2, False]]),
    # ... those rows opened: every op row, the frames still in one
    ({"levels": 3, "fold": FOLD, "expanded": True}, [6, 118, 25, True], [[12, 2, 3, False], [10, -3, 0, True]]),
    # the stack opened: its depths, every one within a budget of 30
    ({"levels": 30, "fold": FOLD, "pyOpen": True}, [27, 459, 25, False], [[10, -3, 10, False], [26, 4, 26, False]]),
    # ... under a budget of 20: 20 rows and the "+7 levels" band
    ({"levels": 20, "fold": FOLD, "pyOpen": True}, [20, 356, 25, False], [[22, 1, 22, True], [19, -3, 19, False]]),
    # a track without Python frames: its depths, as before
    ({"levels": 30}, [27, 459, 0, False], [[12, 12, 12, False]]),
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_with_stack_track_rows() -> None:
    script = ("global.window = {}; require(process.argv[1]); const TE = window.TE;"
              "const track = JSON.parse(process.argv[2]), cases = JSON.parse(process.argv[3]);"
              "console.log(JSON.stringify(cases.map(([opts, , rows]) => {"
              "  const t = TE.makeTrack(track, {}, opts);"
              "  return [[t.levels, t.height, t.python, t.pyFolded], rows.map(([d, f]) => [d, f, t.row(d, f), t.hides(d, f)])];"
              "})));")
    out = subprocess.run(["node", "-e", script, str(PROJECT_ROOT / "static" / "js" / "tracks.js"), json.dumps(TRACK),
                          json.dumps(CASES)], capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(out.stdout) == [[c[1], c[2]] for c in CASES]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_levels_a_track_asks_the_budget_for() -> None:
    script = ("global.window = {}; require(process.argv[1]); const TE = window.TE, t = JSON.parse(process.argv[2]);"
              "const f = JSON.parse(process.argv[3]);"
              "console.log(JSON.stringify([TE.levelsOf(t), TE.levelsOf(t, f), TE.levelsOf(t, f, true), TE.levelsOf(t, {py: 0, ops: 3})]));")
    out = subprocess.run(["node", "-e", script, str(PROJECT_ROOT / "static" / "js" / "tracks.js"), json.dumps(TRACK),
                          json.dumps(FOLD)], capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(out.stdout) == [27, 6, 27, 27]  # folded: the band + 5 op rows
