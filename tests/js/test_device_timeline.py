"""The alignment legend's words (static/js/device_timeline.js TE.alignmentText / alignmentShort), run under Node
with TE.fmtNs stubbed to plain ns: what was done to a profile's times, on what evidence, and how uncertain, for
each case explorer/analysis/device/align.py returns (inside, shifted with slack, longer than its slice, unlinked)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from explorer.analysis.device.align import compute_alignment
from explorer.config import PROJECT_ROOT

E = 1_748_779_200_000_000_000
CASES = [  # (profile, execution slice, words the long form holds, the short form)
    ((E + 100, E + 900), (E, E + 1000), ["drawn as captured", "−100 ns … +100 ns", "uncertain by 200 ns"],
     "aligned by execution slice: shift 0 ns, uncertain by 200 ns"),
    ((E + 5000, E + 5800), (E, E + 1000), ["shifted −4800 ns onto the host clock", "−5000 ns … −4800 ns",
                                           "uncertain by 200 ns"],
     "aligned by execution slice: shift −4800 ns, uncertain by 200 ns"),
    ((E + 100, E + 1250), (E, E + 1000), ["longer than its nc_exec_running slice by 150 ns", "shifted −175 ns",
                                          "disagree"], "aligned by execution slice: shift −175 ns, clocks disagree"),
    ((E, E + 5), (None, None), ["not linked", "unaligned"], "own clock, unaligned"),
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_alignment_words() -> None:
    aligns = [compute_alignment(*p, *s) for p, s, _w, _s in CASES]
    script = ("global.window = { TE: { fmtNs: (ns) => ns + ' ns' } }; require(process.argv[1]);"
              "const TE = window.TE, cases = JSON.parse(process.argv[2]);"
              "console.log(JSON.stringify(cases.map((a) => [TE.alignmentText(a), TE.alignmentShort(a)])));")
    out = subprocess.run(["node", "-e", script, str(PROJECT_ROOT / "static" / "js" / "device_timeline.js"),
                          json.dumps(aligns)], capture_output=True, text=True, check=True, timeout=30)
    for (long, short), (_p, _s, words, want_short) in zip(json.loads(out.stdout), CASES, strict=True):
        assert all(w in long for w in words), long
        assert short == want_short
