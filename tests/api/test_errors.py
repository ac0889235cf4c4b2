"""The one error map (api/errors.py): every ExplorerError class has an HTTP status there, each has its own
code, docs/API.md lists them, and the body leaves the server in the one pinned shape."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import api
import explorer
from api.app import create_app
from api.errors import STATUS_BY_ERROR, status_of
from explorer.config import Settings
from explorer.errors import BadRequest, ExplorerError, UploadFailed

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ONLY = {UploadFailed}  # raised by the upload client, never sent by the server


def project_error_classes() -> set[type[ExplorerError]]:
    """ExplorerError and every subclass defined anywhere in explorer/ or api/ (all modules imported)."""
    for package in (explorer, api):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)
    found: set[type[ExplorerError]] = {ExplorerError}
    todo = [ExplorerError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.split(".")[0] in ("explorer", "api") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_error_class_has_a_status() -> None:
    missing = sorted(cls.__name__ for cls in project_error_classes() - STATUS_BY_ERROR.keys())
    assert missing == []


def test_every_error_class_has_its_own_code() -> None:
    classes = project_error_classes()
    assert sorted(cls.__name__ for cls in classes if "code" not in vars(cls)) == []
    assert len({cls.code for cls in classes}) == len(classes)
    with pytest.raises(TypeError):
        type("NoCode", (ExplorerError,), {"__module__": __name__})


def test_errors_live_beside_each_other() -> None:
    assert {cls.__module__ for cls in project_error_classes()} == {"explorer.errors"}


def test_status_of_reads_the_table() -> None:
    for cls, status in STATUS_BY_ERROR.items():
        assert status_of(cls.__new__(cls)) == status


def test_a_class_without_a_row_gets_its_ancestors_status_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    unlisted = type("Unlisted", (BadRequest,), {"__module__": __name__}, code="unlisted")
    with caplog.at_level(logging.ERROR, logger="api.errors"):
        assert status_of(unlisted("no row")) == STATUS_BY_ERROR[BadRequest]
    assert "Unlisted" in caplog.text and "STATUS_BY_ERROR" in caplog.text


def test_api_doc_lists_every_code_with_its_status() -> None:
    doc = (ROOT / "docs" / "API.md").read_text().split("\n\n")[1]  # the "Errors:" paragraph
    assert doc.startswith("All JSON. Errors:")
    documented = {code: int(status) for status, codes in re.findall(r"(\d{3}) ([a-z_/]+)", doc.replace("\n", ""))
                  for code in codes.split("/")}
    served = {cls.code: status for cls, status in STATUS_BY_ERROR.items()
              if cls not in CLIENT_ONLY and cls is not ExplorerError}
    assert {code: documented.get(code) for code in served} == served


@pytest.mark.parametrize(("path", "status", "body"), [
    ("/api/runs/nope", 404,
     {"error": {"code": "run_not_found", "message": "no run with id 'nope'", "detail": None}}),
    ("/api/s/nope", 404,
     {"error": {"code": "share_not_found", "message": "this share link is unknown or has been revoked",
                "detail": None}}),
    ("/api/runs/nope/shares", 404,
     {"error": {"code": "run_not_found", "message": "no run with id 'nope'", "detail": None}}),
])
def test_error_body_is_pinned(client: TestClient, path: str, status: int, body: dict[str, object]) -> None:
    r = client.get(path)
    assert (r.status_code, r.json()) == (status, body)


def test_bad_request_body_is_pinned(client: TestClient, run_id: str) -> None:
    r = client.get(f"/api/runs/{run_id}/ops", params={"view": "nope"})
    assert (r.status_code, r.json()) == (400, {"error": {
        "code": "bad_request", "message": "unknown op view 'nope'; views: operators, python, all", "detail": None}})


def test_unauthorized_body_is_pinned(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", token="s3cret"))) as locked:
        r = locked.get("/api/runs")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json() == {"error": {"code": "unauthorized", "detail": None, "message":
                                  "this server requires a token: send `Authorization: Bearer <token>`, or open the "
                                  "link with ?token=<token>"}}


HTML = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}  # what a browser sends


def test_a_browser_gets_an_error_page_and_the_api_keeps_json(client: TestClient) -> None:
    page = client.get("/runs/r0000nothere", headers=HTML)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "Not found" in page.text and "r0000nothere" in page.text and 'id="error-message"' in page.text
    assert "content-security-policy" in {k.lower() for k in page.headers}  # a page of the site, under its CSP
    for path, headers in (("/runs/r0000nothere", {}), ("/api/runs/r0000nothere", HTML),
                          ("/runs/r0000nothere", {"accept": "application/json"})):
        body = client.get(path, headers=headers)
        assert body.status_code == 404 and body.json()["error"]["code"] == "run_not_found", path
    unknown = client.get("/no/such/page", headers=HTML)
    assert unknown.status_code == 404 and "text/html" in unknown.headers["content-type"]


def test_the_error_page_escapes_what_the_request_carried(client: TestClient) -> None:
    page = client.get("/runs/<img src=x onerror=alert(1)>", headers=HTML)
    assert page.status_code == 404 and "<img src=x" not in page.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page.text


def test_openapi_documents_errors_as_json_even_for_csv_downloads(client: TestClient) -> None:
    """The CSV downloads answer errors as the one JSON error shape, and /openapi.json says so."""
    paths = client.get("/openapi.json").json()["paths"]
    csv_routes = [p for p, ops in paths.items() if "text/csv" in ops.get("get", {}).get("responses", {})
                  .get("200", {}).get("content", {})]
    assert "/api/runs/{run_id}/device/{profile}/instructions.csv" in csv_routes
    for path, ops in paths.items():
        for method, op in ops.items():
            for status, response in op.get("responses", {}).items():
                if status[:1] in "45" and response.get("content"):
                    assert list(response["content"]) == ["application/json"], (method, path, status)
    missing = client.get("/api/runs/r0000nothere/device/p1/instructions.csv")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("application/json")
    assert missing.json()["error"]["code"] == "run_not_found"
