"""Fast pages over real HTTP: gzip when the client accepts it (and not when it does not), static files at
content-hashed URLs cached for good, bare and stale URLs that still work, plotly.js only on pages with
charts, and the op and kernel tables rendered a page at a time with links the browser can follow."""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import plotly
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import PROJECT_ROOT, Settings
from explorer.runs.ingest import ingest_paths
from explorer.views.tables import TABLE_PAGE_ROWS
from tests.api.conftest import TINY, assert_error
from tests.helpers.wide_trace import WIDE_OPS, write_wide_trace

DEVICE_EXPORT = Path(__file__).resolve().parents[1] / "fixtures" / "neuron" / "device_export"
IMMUTABLE = "public, max-age=31536000, immutable"
ASSET = re.compile(r'(?:src|href)="(/static/([^"?]+)\?v=([0-9a-f]+))"')
PLOTLY = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"  # the full bundle, kept for old links


@pytest.fixture(scope="module")
def wide_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, str]]:
    tmp = tmp_path_factory.mktemp("assets")
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    wide = ingest_paths(store, [write_wide_trace(tmp / "wide.json")], "wide").id
    tiny = ingest_paths(store, [TINY], "tiny").id
    with TestClient(app) as client:
        yield client, wide, tiny


def raw(client: TestClient, path: str, encoding: str) -> tuple[dict[str, str], bytes]:
    """Headers and the body as sent (not decoded by the client)."""
    with client.stream("GET", path, headers={"Accept-Encoding": encoding}) as resp:
        assert resp.status_code == 200, path
        return dict(resp.headers), b"".join(resp.iter_raw())


@pytest.mark.parametrize("path", ["/", "/runs/{wide}", "/runs/{wide}/ops", "/runs/{wide}/kernels",
                                  "/api/runs/{wide}/ops", "/api/runs/{wide}/kernels",
                                  "/api/runs/{wide}/timeline?start_ns=0&end_ns=100000000&width_px=1000",
                                  "/static/vendor/plotly-basic.min.js", "/static/js/tables.js"])
def test_responses_are_gzipped_when_the_client_accepts_it(wide_client: tuple[TestClient, str, str], path: str) -> None:
    client, wide, _ = wide_client
    url = path.format(wide=wide)
    plain_headers, plain = raw(client, url, "identity")
    headers, packed = raw(client, url, "gzip, deflate, br")
    assert "content-encoding" not in plain_headers
    assert headers["content-encoding"] == "gzip" and "Accept-Encoding" in headers["vary"]
    assert gzip.decompress(packed) == plain and len(packed) < len(plain) / 2


def test_streamed_csv_is_gzipped_whole(wide_client: tuple[TestClient, str, str], tmp_path: Path) -> None:
    client, _, _ = wide_client
    run = ingest_paths(client.app.state.explorer.store, [DEVICE_EXPORT], "device")  # type: ignore[attr-defined]
    profile = client.get(f"/api/runs/{run.id}/device/profiles").json()["profiles"][0]["profile_id"]
    url = f"/api/runs/{run.id}/device/{profile}/instructions.csv"
    plain_headers, plain = raw(client, url, "identity")
    headers, packed = raw(client, url, "gzip")
    assert headers["content-encoding"] == "gzip" and "content-encoding" not in plain_headers
    assert gzip.decompress(packed) == plain and plain.count(b"\n") > 10


def test_small_responses_are_not_compressed(wide_client: tuple[TestClient, str, str]) -> None:
    client, _, _ = wide_client
    headers, body = raw(client, "/-/health", "gzip")
    assert "content-encoding" not in headers and body == b'{"status":"ok"}'


def test_pages_link_assets_by_content_hash_cached_for_good(wide_client: tuple[TestClient, str, str]) -> None:
    client, wide, _ = wide_client
    html = client.get(f"/runs/{wide}/ops").text
    links = ASSET.findall(html)
    assert {rel for _, rel, _ in links} >= {"css/app.css", "js/common.js", "js/tables.js", "vendor/plotly-basic.min.js"}
    assert "/static/" not in ASSET.sub("", html)  # no asset without its hash
    for url, rel, digest in links:
        source = PROJECT_ROOT / "static" / rel
        assert digest == hashlib.sha256(source.read_bytes()).hexdigest()[:16], rel
        resp = client.get(url)
        assert resp.status_code == 200 and resp.content == source.read_bytes(), rel
        assert resp.headers["cache-control"] == IMMUTABLE


def test_a_bare_url_works_and_is_revalidated(wide_client: tuple[TestClient, str, str]) -> None:
    client, _, _ = wide_client
    resp = client.get("/static/js/tables.js")
    assert resp.status_code == 200 and resp.content == (PROJECT_ROOT / "static/js/tables.js").read_bytes()
    assert resp.headers["cache-control"] == "no-cache" and resp.headers["content-type"].startswith("application/javascript")
    again = client.get("/static/js/tables.js", headers={"If-None-Match": resp.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_the_full_plotly_bundle_still_answers_its_old_url(wide_client: tuple[TestClient, str, str]) -> None:
    client, _, _ = wide_client
    resp = client.get("/static/vendor/plotly.min.js")
    assert resp.status_code == 200 and resp.content == PLOTLY.read_bytes()


def test_a_stale_hash_redirects_to_the_current_file(wide_client: tuple[TestClient, str, str]) -> None:
    client, _, _ = wide_client
    resp = client.get("/static/css/app.css?v=0123456789abcdef", follow_redirects=False)
    assert resp.status_code == 307
    digest = hashlib.sha256((PROJECT_ROOT / "static/css/app.css").read_bytes()).hexdigest()[:16]
    assert resp.headers["location"] == f"/static/css/app.css?v={digest}"
    assert "cache-control" not in resp.headers or "immutable" not in resp.headers["cache-control"]
    assert client.get("/static/css/app.css?v=0123456789abcdef").status_code == 200


@pytest.mark.parametrize("path", ["/static/js/nope.js", "/static/js/../../api/app.py", "/static/%2e%2e/api/app.py",
                                  "/static/js%2F..%2F..%2Fpyproject.toml", "/static/", "/static//etc/passwd"])
def test_only_the_assets_are_served(wide_client: tuple[TestClient, str, str], path: str) -> None:
    client, _, _ = wide_client
    assert_error(client.get(path), 404, "not_found")


def test_plotly_only_on_pages_with_charts(wide_client: tuple[TestClient, str, str]) -> None:
    client, wide, tiny = wide_client
    charts = {f"/runs/{wide}": True, f"/runs/{wide}/ops": True, f"/runs/{wide}/kernels": True,
              f"/compare?runs={wide},{tiny}": True, "/": False, f"/runs/{wide}/timeline": False}
    for path, has_charts in charts.items():
        html = client.get(path).text
        assert ("plotly" in html) == has_charts, path


def test_the_offline_report_inlines_everything(wide_client: tuple[TestClient, str, str]) -> None:
    client, wide, _ = wide_client
    html = client.get(f"/runs/{wide}/report?download=1").text
    assert "/static/" not in html and "<script src=" not in html
    assert "TE.initTables" in html and "Plotly" in html  # the scripts and plotly.js are inline


def test_table_pages_are_rendered_a_page_at_a_time(wide_client: tuple[TestClient, str, str]) -> None:
    client, wide, _ = wide_client
    names = [r["name"] for r in client.get(f"/api/runs/{wide}/ops?sort=%2Bname").json()["rows"]]
    assert len(names) == WIDE_OPS
    n, pages = TABLE_PAGE_ROWS, -(-WIDE_OPS // TABLE_PAGE_ROWS)
    last = names[(pages - 1) * n:]
    for page, expected in ((1, names[:n]), (2, names[n:2 * n]), (pages, last), (99, last)):
        resp = client.get(f"/runs/{wide}/ops", params={"sort": "+name", "page": page})
        ctx = resp.context["page"]
        assert [r["name"] for r in ctx.page_rows] == expected and len(ctx.rows) == WIDE_OPS
        assert resp.text.count('<td class="name"') == len(expected)
    html = client.get(f"/runs/{wide}/ops", params={"sort": "+name", "page": 2}).text
    assert 'href="?sort=%2Bname&amp;page=3"' in html and 'href="?sort=%2Bname"' in html  # next, previous
    assert f"rows {n + 1}–{2 * n} of {WIDE_OPS} · page 2 of {pages}" in html
    assert 'href="?sort=%2Bname&amp;view=python"' in html  # another view starts at its first page
    kt = client.get(f"/runs/{wide}/kernels", params={"page": pages}).context["page"]
    assert len(kt.page_rows) == len(last) and kt.page_count == pages
    assert_error(client.get(f"/runs/{wide}/ops", params={"page": 0}), 422, "validation")
