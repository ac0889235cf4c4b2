"""The compare headline in a browser (issue 34 point 7): one model on an A100 and on an H100, the H100 run
with the faster median step but more summed device time; the page reads "faster" on the step, shows device
time as the second figure, both devices, host-bound flags and the device warning; and the runs list names
a multi-file run's files and its device. Screenshots for review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.analysis.collectives.symm_mem import DEVICE, write_run
from tests.api.test_compare_headline import A100, H100, RUN_A, RUN_B
from tests.e2e.test_compare_page import ingest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_compare_headline_reads_the_step_and_names_the_devices(page: Any, server: Any, tmp_path: Path,
                                                               shot: Any) -> None:
    a = ingest(server, tmp_path, "model on A100", RUN_A)
    b = ingest(server, tmp_path, "model on H100", RUN_B)
    page.goto(f"{server.url}/compare?runs={a},{b}")
    page.wait_for_selector("body[data-init='1']")
    assert page.locator("#headline .verdict").all_inner_texts() == ["faster"]
    assert page.locator("#headline .pct").all_inner_texts() == ["-9.5 %"]
    assert "Median step time" in page.inner_text("#headline-metric")
    assert page.locator("#headline-secondary .sec-pct").all_inner_texts() == ["+40.0 %"]
    assert page.locator("#compare-runs .run-devices").all_inner_texts() == [f"1 × {A100}", f"1 × {H100}"]
    assert page.locator("#compare-runs .host-bound").count() == 2
    assert "different devices" in page.inner_text("#compare-warnings")
    shot(page, "compare-06-step-headline-devices", full_page=True)

    files = write_run(tmp_path / "tp8", world=8, calls=3)
    from explorer.runs.ingest import ingest_paths
    tp8 = ingest_paths(server.state.store, files, "tp8 decode").id
    page.goto(server.url + "/")
    row = page.locator("#runs-table tr", has_text="tp8 decode")
    assert row.locator(".run-source").inner_text().startswith("8 files: rank0.json, rank1.json, rank2.json")
    assert row.locator(".run-devices").inner_text() == f"8 × {DEVICE}"
    shot(page, "runs-02-files-and-devices", full_page=True)
    page.goto(f"{server.url}/runs/{tp8}")
    page.wait_for_selector("body[data-init='1']")
    assert page.locator("#run-devices .device").all_inner_texts() == [f"8 × {DEVICE}"]
    assert "8 files" in page.inner_text("#run-devices")
    shot(page, "overview-06-device-and-files")
