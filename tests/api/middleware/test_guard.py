"""Where requests may come from (api/middleware/guard.py): DNS-rebinding Host names, cross-origin mutations with
only a cookie, Secure cookies over HTTPS, and the security headers — over real HTTP where it matters."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.views.render import PAGE_CSP, REPORT_CSP
from tests.api.conftest import TINY, assert_error, wait_until_done
from tests.helpers.support import serve_subprocess

TOKEN = "s3cret-token-0123456789"


def app_client(tmp_path: Path, base_url: str = "http://127.0.0.1:8000", **given: object) -> TestClient:
    settings = Settings(data_dir=tmp_path / "data", **{"allowed_hosts": [], **given})  # type: ignore[arg-type]
    return TestClient(create_app(settings), base_url=base_url)


def upload(client: TestClient, **headers: str) -> httpx.Response:
    return client.post("/api/runs", files={"files": (TINY.name, TINY.read_bytes())}, headers=headers)


def test_foreign_host_names_are_refused(tmp_path: Path) -> None:
    with app_client(tmp_path) as client:
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example"):
            body = assert_error(client.get("/api/runs", headers={"host": host}), 400, "bad_request")
            assert "--allowed-hosts" in body["error"]["message"]
        for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000"):
            assert client.get("/api/runs", headers={"host": host}).status_code == 200, host
    with app_client(tmp_path, allowed_hosts=["explorer.team"]) as client:
        assert client.get("/api/runs", headers={"host": "explorer.team:443"}).status_code == 200
        assert client.get("/api/runs", headers={"host": "other.team"}).status_code == 400


def test_wildcard_bind_answers_any_host(tmp_path: Path) -> None:
    with app_client(tmp_path, host="0.0.0.0", token=TOKEN) as client:
        r = client.get("/api/runs", headers={"host": "10.1.2.3:8000", "authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200


def test_cross_origin_upload_without_a_token_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    with app_client(tmp_path) as client:
        assert_error(upload(client, origin="http://evil.example"), 403, "forbidden")
        assert_error(upload(client, **{"sec-fetch-site": "cross-site"}), 403, "forbidden")
        assert client.get("/api/runs").json()["total"] == 0
        assert list((tmp_path / "data" / "tmp").iterdir()) == []
        same = upload(client, origin="http://127.0.0.1:8000")  # the UI's own upload form
        assert same.status_code == 202 and wait_until_done(client, same.json()["id"])["status"] == "ready"
        assert upload(client).status_code in (200, 202)  # no Origin: the CLI, curl, scripts


def test_cookie_only_share_from_another_origin_is_refused(tmp_path: Path) -> None:
    with app_client(tmp_path, token=TOKEN) as client:
        auth = {"authorization": f"Bearer {TOKEN}"}
        run_id = upload(client, **auth).json()["id"]
        wait_until_done_auth(client, run_id, auth)
        client.get(f"/?token={TOKEN}")  # the browser now holds the token cookie
        form = {"content-type": "application/x-www-form-urlencoded", "origin": "http://evil.example"}
        assert_error(client.post(f"/api/runs/{run_id}/share", content=b"x=1", headers=form), 403, "forbidden")
        assert client.get(f"/api/runs/{run_id}/shares").json()["shares"] == []
        ok = client.post(f"/api/runs/{run_id}/share", headers={**form, **auth})  # a script with the bearer
        assert ok.status_code == 201, ok.text


def wait_until_done_auth(client: TestClient, run_id: str, auth: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while client.get(f"/api/runs/{run_id}", headers=auth).json()["status"] not in ("ready", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_security_headers(tmp_path: Path) -> None:
    with app_client(tmp_path) as client:
        run_id = upload(client).json()["id"]
        wait_until_done(client, run_id)
        page = client.get(f"/runs/{run_id}")
        assert page.headers["content-security-policy"] == f"{PAGE_CSP}; frame-ancestors 'self' vscode-webview: vscode-file:"
        assert page.headers["x-content-type-options"] == "nosniff"
        token = client.post(f"/api/runs/{run_id}/share").json()["token"]
        for report in (client.get(f"/runs/{run_id}/report"), client.get(f"/s/{token}")):  # inline scripts
            assert report.headers["content-security-policy"].startswith(REPORT_CSP + "; frame-ancestors")
        api = client.get("/api/runs")
        assert api.headers["x-content-type-options"] == "nosniff" and "content-security-policy" not in api.headers


def test_cookies_are_secure_over_https_only(tmp_path: Path) -> None:
    with app_client(tmp_path, base_url="https://127.0.0.1", token=TOKEN) as client:
        assert "; Secure" in client.get(f"/?token={TOKEN}").headers["set-cookie"]
    with app_client(tmp_path, token=TOKEN) as client:
        assert "Secure" not in client.get(f"/?token={TOKEN}").headers["set-cookie"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    # no extra host names: exactly what a user's `serve --token` answers to
    with serve_subprocess(tmp_path / "data", "--token", TOKEN, env={"EXPLORER_ALLOWED_HOSTS": "[]"}) as (base, _):
        yield base


@pytest.mark.slow
def test_real_server_refuses_rebinding_and_trusts_its_proxy_for_https(served: str) -> None:
    r = httpx.get(f"{served}/-/health", headers={"host": "evil.example"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
    behind_tls = httpx.get(f"{served}/?token={TOKEN}", headers={"x-forwarded-proto": "https"})
    assert "; Secure" in behind_tls.headers["set-cookie"]  # the proxy on 127.0.0.1 is trusted by default
    plain = httpx.get(f"{served}/?token={TOKEN}")
    assert "Secure" not in plain.headers["set-cookie"]
