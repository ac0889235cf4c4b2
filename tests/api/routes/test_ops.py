"""The op table through the API: sorts, options, time ranges and views."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.api.conftest import Uploader, assert_error

FRAMES = Path(__file__).resolve().parents[2] / "fixtures" / "kineto_recursive_frames.json"


def test_op_table_sorted_by_device_time(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/ops").json()
    assert body["device_total_ns"] == 185_000
    rows = {r["name"]: r for r in body["rows"]}
    assert rows["aten::addmm"]["device_total_ns"] == 150_000 and rows["aten::linear"]["self_device_ns"] == 0
    assert rows["aten::mul"]["calls"] == 1 and rows["aten::mul"]["self_cpu_ns"] == 90_000
    assert body["rows"][0]["name"] in ("ProfilerStep*", "aten::linear", "aten::addmm")


def test_op_table_options(client: TestClient, run_id: str) -> None:
    base = f"/api/runs/{run_id}/ops"
    assert [r["name"] for r in client.get(f"{base}?sort=name&limit=2").json()["rows"]] == [
        "ProfilerStep*", "aten::add"]
    assert [r["name"] for r in client.get(f"{base}?q=MUL").json()["rows"]] == ["aten::mul"]
    shapes = client.get(f"{base}?by_shape=1&q=addmm").json()["rows"]
    assert shapes[0]["input_shapes"] not in ("", None)
    assert_error(client.get(f"{base}?sort=bogus"), 400, "bad_request")


def test_op_table_time_range_keeps_ops_starting_inside(client: TestClient, run_id: str) -> None:
    rows = client.get(f"/api/runs/{run_id}/ops?start_ns=300000&end_ns=960000").json()["rows"]
    assert {r["name"] for r in rows} == {"aten::mul", "aten::add"}
    mul = next(r for r in rows if r["name"] == "aten::mul")
    assert mul["self_cpu_ns"] == 90_000 and mul["device_total_ns"] == 20_000


def frame_kinds() -> dict[str, set[str]]:
    """Name -> the categories its events have in the recursive-frames fixture."""
    kinds: dict[str, set[str]] = {}
    for e in json.loads(FRAMES.read_text())["traceEvents"]:
        if e.get("ph") == "X" and e["cat"] in ("cpu_op", "user_annotation", "python_function"):
            kinds.setdefault(e["name"], set()).add(e["cat"])
    return kinds


def launch_frame() -> str:
    """The innermost python frame around the fixture's one launch that has no op around it."""
    events = [e for e in json.loads(FRAMES.read_text())["traceEvents"] if e.get("ph") == "X"]

    def around(call: dict[str, Any], cats: set[str]) -> list[dict[str, Any]]:
        return [e for e in events if e["cat"] in cats and e["ts"] <= call["ts"]
                and call["ts"] + call["dur"] <= e["ts"] + e["dur"]]

    bare = [c for c in events if c["cat"] in ("cuda_runtime", "cuda_driver") and not around(c, {"cpu_op", "user_annotation"})]
    assert len(bare) == 1
    return str(max(around(bare[0], {"python_function"}), key=lambda e: e["ts"])["name"])


def test_op_views(client: TestClient, upload: Uploader) -> None:
    run = upload(files=[(FRAMES.name, FRAMES.read_bytes())])["id"]
    kinds = frame_kinds()
    base = f"/api/runs/{run}/ops"
    default = client.get(base).json()
    assert (default["view"], default["sort"], default["has_modules"]) == ("operators", "-self_device_ns", True)
    assert {r["name"] for r in default["rows"]} == {n for n, c in kinds.items() if c != {"python_function"}} | {
        launch_frame()}  # the frame that launched a kernel with no op around it: a row, marked by its kind
    assert {r["kind"] for r in default["rows"] if r["name"] == launch_frame()} == {"python"}
    python_body = client.get(f"{base}?view=python").json()
    python = python_body["rows"]
    assert python_body["sort"] == "-cpu_total_ns"
    assert {r["name"] for r in python} == {n for n, c in kinds.items() if c == {"python_function"}}
    assert {r["name"] for r in client.get(f"{base}?view=all").json()["rows"]} == set(kinds)
    assert default["rows"] == client.get(f"{base}?view=operators&sort=-self_device_ns").json()["rows"]
    modules = client.get(f"{base}?view=all&by_module=1&q=aten::mm").json()["rows"]
    assert [(r["module"], r["name"]) for r in modules] == [("Net_0/Linear_0", "aten::mm")]
    ranged = client.get(f"{base}?view=python&start_ns=0&end_ns=1000000000").json()["rows"]
    assert {r["name"] for r in ranged} == {r["name"] for r in python}
    for bad in ("kernels", "", "ALL"):
        assert_error(client.get(f"{base}?view={bad}"), 400, "bad_request")


def test_op_default_sort_without_device_time_is_self_cpu(client: TestClient, upload: Uploader) -> None:
    doc = json.loads(FRAMES.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("pid") != 0]
    run = upload(files=[("host.json", json.dumps(doc).encode())])["id"]
    body = client.get(f"/api/runs/{run}/ops?view=all").json()
    assert body["sort"] == "-self_cpu_ns" and body["device_total_ns"] == 0
    assert [r["self_cpu_ns"] for r in body["rows"]] == sorted((r["self_cpu_ns"] for r in body["rows"]), reverse=True)
