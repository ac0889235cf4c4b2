"""The server behind a path prefix, as VS Code's port forwarding serves it (code-server's `/proxy/8000/`,
which strips the prefix before forwarding): `--root-path /proxy/8000` and a small prefix-stripping reverse
proxy written here. Every page, asset, fetch and download must stay under the prefix; the timeline's details
panel shows the VS Code source link of a with_stack frame."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.helpers import stack_helper
from tests.helpers.support import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PREFIX = "/proxy/8000"
HELPER = Path(inspect.getsourcefile(stack_helper) or "").resolve()
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


@dataclass
class Proxy:
    url: str
    upstream: str
    escaped: list[str] = field(default_factory=list)  # requests that left the prefix
    seen: list[str] = field(default_factory=list)


def proxy_app(proxy: Proxy) -> Starlette:
    async def forward(request: Request) -> Response:
        path = request.url.path
        proxy.seen.append(path)
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            proxy.escaped.append(path)
            return Response("outside the forwarded prefix", status_code=404)
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        async with httpx.AsyncClient(base_url=proxy.upstream, timeout=30) as client:
            up = await client.request(request.method, path[len(PREFIX):] or "/", params=request.url.query,
                                      content=body, headers=headers)
        return Response(up.content, status_code=up.status_code,
                        headers={k: v for k, v in up.headers.items() if k.lower() not in HOP_HEADERS})

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])])


def serve_in_thread(app: Any, port: int, **config: Any) -> Any:
    import uvicorn

    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                                        **config))
    threading.Thread(target=srv.run, daemon=True).start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started, "server did not start"
    return srv


@pytest.fixture(scope="module")
def behind_proxy(tmp_path_factory: pytest.TempPathFactory, stack_trace: Path) -> Iterator[tuple[Proxy, str]]:
    from api.app import create_app
    from explorer.config import Settings
    from explorer.runs.ingest import ingest_paths

    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("data"), root_path=PREFIX,
                              source_root=str(HELPER.parents[2])))
    run_id = ingest_paths(app.state.explorer.store, [stack_trace], "with_stack behind a proxy").id
    up_port, proxy_port = free_port(), free_port()
    upstream = serve_in_thread(app, up_port, root_path=PREFIX)  # as `trace-explorer serve --root-path` runs it
    proxy = Proxy(f"http://127.0.0.1:{proxy_port}", f"http://127.0.0.1:{up_port}")
    front = serve_in_thread(proxy_app(proxy), proxy_port)
    with urlopen(f"{proxy.url}{PREFIX}/-/health", timeout=5) as r:
        assert r.status == 200
    yield proxy, run_id
    front.should_exit = upstream.should_exit = True


def test_pages_timeline_and_source_link_under_the_prefix(page: Any, behind_proxy: tuple[Proxy, str]) -> None:
    proxy, run_id = behind_proxy
    base = proxy.url + PREFIX
    page.goto(base + "/")
    page.click(f"a[href='{PREFIX}/runs/{run_id}']")
    page.wait_for_url(f"{base}/runs/{run_id}")
    assert page.get_attribute("#open-perfetto", "href") == f"{PREFIX}/api/runs/{run_id}/export?format=perfetto-json"
    export = page.request.get(base + f"/api/runs/{run_id}/export?format=perfetto-json")
    assert export.status == 200 and b'"traceEvents"' in export.body()

    page.click("#tab-timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_function("() => TE.timelineApi.fetches() > 0")
    # an op's id from the search (through the proxy too): the whole-run window may merge a short op into
    # its pixel, so its id need not be in the first window's data
    found = page.request.get(base + f"/api/runs/{run_id}/search?q=aten::rsqrt&limit=5")
    assert found.status == 200
    ids = [m["slice_id"] for m in found.json()["matches"] if m["name"] == "aten::rsqrt"]
    assert ids, "the search (through the proxy) finds the with_stack run's ops"
    page.evaluate(f"() => TE.timelineApi.select({ids[0]})")
    page.wait_for_selector("#tl-source-link")
    line = inspect.getsourcelines(stack_helper.rms_norm)[1]
    assert page.get_attribute("#tl-source-link", "href") == f"vscode://file{HELPER}:{line}"
    assert page.text_content("#tl-source-link") == f"source: {HELPER}:{line}"

    page.goto(base + f"/runs/{run_id}/ops?view=python")
    assert page.locator(f"a.source-link[href='vscode://file{HELPER}:{line}']").count() == 1
    assert not proxy.escaped, f"requests outside {PREFIX}: {proxy.escaped}"
    assert any(p.startswith(PREFIX + "/api/runs/") and p.endswith("/timeline") for p in proxy.seen)
    assert any(p.startswith(PREFIX + "/static/") for p in proxy.seen)
