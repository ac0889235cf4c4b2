"""End-to-end: the memory page in a browser on a real torch.profiler(profile_memory=True) capture that leaks a
tensor per step: the peak and its top owners on the first screen, the timeline draws, the leak is listed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.ingest import ingest_paths

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


def test_memory_page_with_a_snapshot_categories_and_a_baseline(page: Any, server: Any, memory_run: str,
                                                               tmp_path: Path, shot: Any) -> None:
    import pickle

    from tests.analysis.test_alloc_snapshot import snapshot

    pytest.importorskip("torch")
    leak = tmp_path / "b16.json"
    proc = subprocess.run([sys.executable, "-c", PROFILE.replace("8, leak=True", "16, leak=False"), str(leak)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (tmp_path / "snapshot.pickle").write_bytes(pickle.dumps(snapshot(), protocol=4))
    (tmp_path / "timeline.raw.json").write_text(
        '[[-1, 1, 1048576, 0], [1000, 2, 4194304, 4], [2000, 2, 2097152, 5], [3000, 4, -4194304, 4]]')
    run = ingest_paths(server.state.store, [leak, tmp_path / "snapshot.pickle", tmp_path / "timeline.raw.json"],
                       "batch 16 + snapshot").id
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run}/memory?baseline={memory_run}")
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#fig-snapshot-0 .main-svg")
    page.wait_for_selector("#fig-categories .main-svg")
    assert "aten::clamp_min" in page.inner_text("#memory-compare")
    assert page.inner_text(".snapshot-peak").strip() == "22.00 MiB"
    assert "train.py:5:step" in page.inner_text(".snapshot-peak-frames")
    assert "activation" in page.inner_text("#categories")
    shot(page, "memory-compare")
    page.locator("#categories").scroll_into_view_if_needed()
    shot(page, "memory-snapshot-full", full_page=True)


def test_memory_page_of_a_neuron_run_shows_hbm_by_type(page: Any, server: Any, shot: Any) -> None:
    export = ROOT / "tests" / "fixtures" / "neuron" / "device_export"
    run = ingest_paths(server.state.store, [export], "neuron export").id
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{server.url}/runs/{run}/memory")
    page.wait_for_selector("body[data-init='1']")
    page.wait_for_selector("#fig-hbm-0 .main-svg")
    assert "tensors" in page.inner_text(".hbm")
    shot(page, "memory-neuron-hbm")
