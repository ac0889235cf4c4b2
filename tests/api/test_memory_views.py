"""Memory beyond the memory page, through the app: the op table's memory columns on the ops page and its twin, and
memory in compare (issue 38), on real torch.profiler(profile_memory=True) captures made here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Uploader, assert_error
from tests.helpers.memory_profiles import train_profile

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("memory_views")
    out = {"b8": d / "b8.json", "b16": d / "b16.json"}
    train_profile(out["b8"], 8)
    train_profile(out["b16"], 16)
    return out


def uploaded(upload: Uploader, path: Path) -> str:
    run: dict[str, Any] = upload(files=[(path.name, path.read_bytes())])
    assert run["status"] == "ready", run
    return str(run["id"])


def test_ops_page_and_twin_show_the_memory_columns(client: TestClient, upload: Uploader,
                                                   profiles: dict[str, Path]) -> None:
    rid = uploaded(upload, profiles["b8"])
    html = client.get(f"/runs/{rid}/ops?sort=-self_allocated_bytes").text
    for col in ("allocated_bytes", "self_allocated_bytes", "allocations", "self_net_bytes", "self_peak_bytes"):
        assert f'data-col="{col}"' in html
    twin = client.get(f"/api/runs/{rid}/ops?sort=-self_allocated_bytes").json()
    assert twin["memory"]["device"] == "CPU"
    got = [r["self_allocated_bytes"] for r in twin["rows"]]
    assert got == sorted(got, reverse=True) and got[0] > 0
    # grouped by module, the rows have no memory columns: sorting by one is a clear 400
    assert_error(client.get(f"/api/runs/{rid}/ops?sort=-self_allocated_bytes&by_module=1"), 400, "bad_request")
