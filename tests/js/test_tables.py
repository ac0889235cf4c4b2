"""The live op table's byte cells (static/js/tables.js TE.fmtBytes), run under Node, against the server's own
rendering of the same values (templates/_memory_macros.html mib()): the first page the server draws and the rows
the browser draws after it must read alike, rounding ties included."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from explorer.config import PROJECT_ROOT
from explorer.views.render import make_environment

VALUES = [0, 1, 1023, 1024, 1536, 1088, 65535, 2**20 - 1, 2**20, 3 * 2**20 // 2, 2**20 + 2**20 // 200,
          int(1.125 * 2**20), int(2.005 * 2**20), 2**30 - 1, 2**30, 5 * 2**30 + 12345, 2**40, -1, -4096,
          -3 * 2**20, -(2**31)]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_bytes_read_as_the_server_writes_them() -> None:
    template = make_environment().from_string(
        '{% from "_memory_macros.html" import mib %}{% for v in values %}{{ mib(v) }}\n{% endfor %}')
    server = [re.sub(r"<[^>]+>", "", line) for line in template.render(values=VALUES).splitlines()]
    script = ("global.window = {}; require(process.argv[1]);"
              "console.log(JSON.stringify(JSON.parse(process.argv[2]).map(window.TE.fmtBytes)));")
    out = subprocess.run(["node", "-e", script, str(PROJECT_ROOT / "static" / "js" / "tables.js"), json.dumps(VALUES)],
                         capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(out.stdout) == server
