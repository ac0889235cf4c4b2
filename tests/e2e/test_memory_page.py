"""End-to-end: the memory page in a browser on a real torch.profiler(profile_memory=True) capture that leaks a
tensor per step: the peak and its top owners on the first screen, the timeline draws, the leak is listed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from explorer.service import ingest_paths

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
PROFILE = "from pathlib import Path; import sys; from tests.analysis.test_memory import train_profile; " \
          "train_profile(Path(sys.argv[1]), 8, leak=True)"


@pytest.fixture(scope="module")
def memory_run(server: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("memory") / "leak.json"
    proc = subprocess.run([sys.executable, "-c", PROFILE, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return ingest_paths(server.state.store, [path], "mlp leak").id


def test_memory_page_answers_the_peak_on_its_first_screen(page: Any, server: Any, memory_run: str,
                                                          shot: Any) -> None:
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{memory_run}/memory")
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#fig-memory-0 .main-svg")
    assert page.get_attribute("#tab-memory", "class") == "on"
    for sel in (".peak-bytes", "#peak-owners tbody tr"):
        box = page.locator(sel).first.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 1000  # above the fold
    assert "MiB" in page.inner_text(".peak-bytes")
    assert "aten::cumsum" in page.inner_text("#leaks")
    shot(page, "memory-page")
    shot(page, "memory-page-full", full_page=True)
    api = page.request.get(f"{server.url}/api/runs/{memory_run}/memory").json()
    assert api["report"]["leaks"][0]["owner"] == "aten::cumsum"
