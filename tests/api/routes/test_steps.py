"""The step view through HTTP: the JSON twin equals the page's data, the page links its twin and the
timeline, and bad annotations are clear 4xx errors."""

from __future__ import annotations

import html
import json
from pathlib import Path

from fastapi.testclient import TestClient

from explorer.analysis.steps import MAX_ANNOTATION_CHARS
from tests.api.conftest import Uploader, assert_error
from tests.helpers.kernel_trace import write_kernel_trace


def test_steps_route_page_and_twin(client: TestClient, upload: Uploader, tmp_path: Path) -> None:
    path = write_kernel_trace(tmp_path / "kernels.json")
    run = upload(files=[(path.name, path.read_bytes())])["id"]
    body = client.get(f"/api/runs/{run}/steps").json()
    names = [e["name"] for e in json.loads(path.read_text())["traceEvents"]
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert body["annotation"] == "ProfilerStep#" and [s["name"] for s in body["steps"]] == names
    page = client.get(f"/runs/{run}/steps")
    assert page.status_code == 200
    text = page.text
    assert f'href="/api/runs/{run}/steps"' in text and 'id="tab-steps"' in text
    slow = body["steps"][body["slowest"]]
    assert html.escape(f'/runs/{run}/timeline?{slow["timeline"]["query"]}') in text
    assert text.count('class="step-row') == len(names)
    report = client.get(f"/runs/{run}/report").text
    section = report.split('id="report-steps"')[1].split("</section>")[0]
    assert section.count('class="step-row') == len(names) and "/timeline?" not in section  # offline: no links
    other = client.get(f"/api/runs/{run}/steps?annotation=aten::mul").json()
    assert other["count"] == 3 and other["annotation"] == "aten::mul"
    assert f'href="/api/runs/{run}/steps?annotation=aten%3A%3Amul"' in client.get(
        f"/runs/{run}/steps?annotation=aten::mul").text


def test_steps_bad_annotation_is_a_clear_error(client: TestClient, run_id: str) -> None:
    assert_error(client.get(f"/api/runs/{run_id}/steps?annotation="), 400, "bad_request")
    assert_error(client.get(f"/api/runs/{run_id}/steps?annotation=" + "x" * (MAX_ANNOTATION_CHARS + 1)), 422,
                 "validation")
    assert_error(client.get("/api/runs/nope/steps"), 404, "run_not_found")
    empty = client.get(f"/api/runs/{run_id}/steps?annotation=%3Cscript%3E").json()
    assert (empty["count"], empty["slowest"]) == (0, None)
    page = client.get(f"/runs/{run_id}/steps?annotation=%3Cscript%3E")
    assert page.status_code == 200 and 'id="steps-empty"' in page.text and "<script>" not in page.text.split(
        "steps-empty")[1].split("</div>")[0]


def test_hostile_step_names_are_escaped(client: TestClient, upload: Uploader) -> None:
    name = "<script>alert(1)</script>#1"
    events = [{"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 50},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
               "args": {"stream": 7, "device": 0}}]
    run = upload(files=[("hostile.json", json.dumps({"traceEvents": events}).encode())])["id"]
    body = client.get(f"/api/runs/{run}/steps", params={"annotation": "<script>"}).json()
    assert [(s["name"], s["dur_ns"], s["compute_ns"]) for s in body["steps"]] == [(name, 50_000, 5_000)]
    text = client.get(f"/runs/{run}/steps", params={"annotation": "<script>"}).text
    assert "<script>alert(1)" not in text and html.escape(name, quote=False) in text
