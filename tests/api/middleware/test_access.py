"""Token access: bearer header, cookie, ?token= (sets the cookie); health and static stay open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.middleware.access import FailedLogins
from explorer.config import Settings
from tests.api.conftest import assert_error

TOKEN = "tok-123"


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", token=TOKEN))) as c:
        yield c


def test_requests_without_token_get_401(locked: TestClient) -> None:
    for path in ("/api/runs", "/-/version", "/docs", "/runs/x"):
        body = assert_error(locked.get(path), 401, "unauthorized")
        assert "token" in body["error"]["message"]
    assert_error(locked.get("/api/runs", headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
    assert_error(locked.post("/api/runs", files={"files": ("a.json", b"{}")}), 401, "unauthorized")


def test_health_and_static_are_open(locked: TestClient) -> None:
    assert locked.get("/-/health").status_code == 200
    assert locked.get("/static/vendor/plotly.min.js").status_code == 200


def test_bearer_cookie_and_query_token(locked: TestClient) -> None:
    assert locked.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    r = locked.get(f"/api/runs?token={TOKEN}")
    assert r.status_code == 200 and f"explorer_token={TOKEN}" in r.headers["set-cookie"]
    assert locked.get("/api/runs").status_code == 200  # the cookie now carries it


def test_open_server_needs_no_token(client: TestClient) -> None:
    assert client.get("/api/runs").status_code == 200


NON_ASCII = "tøken-训练"  # a token of any characters: compared as UTF-8 bytes
WIRE = NON_ASCII.encode("utf-8")


@pytest.mark.parametrize("where", ["bearer", "query", "cookie_plain", "cookie_quoted"])
def test_non_ascii_token_sent_anywhere_is_401_not_500(locked: TestClient, where: str) -> None:
    octal = "".join(f"\\{b:03o}" for b in WIRE)
    request = {"bearer": {"headers": {"Authorization": b"Bearer " + WIRE}},
               "query": {"params": {"token": NON_ASCII}},
               "cookie_plain": {"headers": {"Cookie": b"explorer_token=" + WIRE}},
               "cookie_quoted": {"headers": {"Cookie": f'explorer_token="{octal}"'}}}[where]
    assert_error(locked.get("/api/runs", **request), 401, "unauthorized")  # type: ignore[arg-type]


@pytest.fixture
def non_ascii(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", token=NON_ASCII))) as c:
        yield c


def test_a_non_ascii_server_token_is_accepted_as_utf8_everywhere(non_ascii: TestClient) -> None:
    assert non_ascii.get("/api/runs", headers={"Authorization": b"Bearer " + WIRE}).status_code == 200  # type: ignore[dict-item]
    r = non_ascii.get("/api/runs", params={"token": NON_ASCII})
    assert r.status_code == 200
    quoted = "".join(chr(b) if b < 128 else f"\\{b:03o}" for b in WIRE)
    assert f'explorer_token="{quoted}"' in r.headers["set-cookie"]  # quoted byte by byte, read back by the server
    assert non_ascii.get("/api/runs").status_code == 200  # the cookie now carries it
    non_ascii.cookies.clear()
    assert_error(non_ascii.get("/api/runs", params={"token": "tøken"}), 401, "unauthorized")


def test_a_fresh_query_token_wins_over_a_stale_cookie(locked: TestClient) -> None:
    locked.cookies.set("explorer_token", "stale")
    r = locked.get(f"/api/runs?token={TOKEN}")
    assert r.status_code == 200 and f"explorer_token={TOKEN}" in r.headers["set-cookie"]


def test_wrong_tokens_are_rate_limited_per_address(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", token=TOKEN, auth_failures_per_minute=3)
    with TestClient(create_app(settings)) as c:
        for _ in range(3):
            assert_error(c.get("/api/runs", headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
        r = c.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})  # even the right one, now
        body = assert_error(r, 429, "rate_limited")
        assert 1 <= int(r.headers["retry-after"]) <= 60 and body["error"]["detail"]["retry_after_s"] == int(r.headers["retry-after"])
        assert c.get("/-/health").status_code == 200  # open paths stay open
        assert_error(c.get("/api/runs"), 401, "unauthorized")  # no token given: plain 401, no count
        with TestClient(create_app(settings), client=("10.0.0.9", 5000)) as other:  # another address is not held
            assert other.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_failed_logins_window_and_bound() -> None:
    now = [0.0]
    limiter = FailedLogins(2, clock=lambda: now[0])
    limiter.record("a")
    assert limiter.retry_after("a") is None
    now[0] = 10.0
    limiter.record("a")
    assert limiter.retry_after("a") == 50  # until the first failure (t=0) is a minute old
    now[0] = 60.0
    assert limiter.retry_after("a") is None  # one failure left in the window
    assert FailedLogins(0).retry_after("a") is None
    limiter.MAX_ADDRESSES = 3
    for address in "bcde":
        limiter.record(address)
    assert len(limiter._failures) == 3 and "a" not in limiter._failures
