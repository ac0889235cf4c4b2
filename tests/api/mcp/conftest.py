"""MCP test harness: a real server (uvicorn on a free port, a token set) over runs of real traces, the SDK's own
client over HTTP and over stdio, and the check that a tool's answer is its HTTP twin's answer, bounded."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.e2e.conftest import serving

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "api" / "fixtures" / "tiny_kineto.json"
NEURON_EXPORT = ROOT / "tests" / "fixtures" / "neuron" / "device_export"
GPU_TRACE = "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
TOKEN = "mcp-test-token-0123456789"
HOSTILE = "[bold]x <script>alert(1)</script> **y** | `z`"
T = TypeVar("T")


@dataclass
class Served:
    url: str
    runs: dict[str, str]  # role -> run id
    http: httpx.Client  # the API, with the token

    def api(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params=params)
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> Iterator[Served]:
    from api.app import create_app
    from explorer.config import Settings
    from explorer.runs.ingest import ingest_paths

    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("data"), token=TOKEN))
    store = app.state.explorer.store
    runs = {"tiny": ingest_paths(store, [TINY], "tiny").id,
            "hostile": ingest_paths(store, [TINY], HOSTILE).id,
            "gpu": ingest_paths(store, [shared_traces / GPU_TRACE], "alexnet").id,
            "device": ingest_paths(store, [NEURON_EXPORT], "neuron export").id}
    with serving(app) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                                          timeout=60) as http:
        yield Served(url, runs, http)


def run_session(connect: Callable[[], Any], steps: Callable[[Any], Awaitable[T]]) -> T:
    """`steps(client)` in one session of the SDK's Client over `connect()`'s transport."""
    from mcp import Client

    async def main() -> T:
        async with Client(connect()) as client:
            return await steps(client)

    # on a thread of its own: a browser test earlier in this worker (Playwright's sync API) keeps an event loop
    # running on the main thread for the whole session, where asyncio.run() refuses to start another
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-client") as pool:
        return pool.submit(asyncio.run, main()).result()


def http_transport(url: str, token: str | None, statuses: list[int] | None = None) -> Callable[[], Any]:
    """The SDK's streamable HTTP transport to `url`/mcp with `token` as its bearer; each response's status code is
    appended to `statuses`."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    @asynccontextmanager
    async def connect() -> AsyncIterator[Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async def record(response: Any) -> None:
            if statuses is not None:
                statuses.append(response.status_code)

        async with httpx2.AsyncClient(headers=headers, timeout=120, event_hooks={"response": [record]}) as http, \
                streamable_http_client(url + "/mcp", http_client=http) as streams:
            yield streams

    return connect


def stdio_params(data_dir: Path) -> Any:
    from mcp.client.stdio import StdioServerParameters

    code = ("import sys\nfrom api.launch import main\nsys.argv = ['trace-explorer', 'mcp', '--data-dir', sys.argv[1]]\n"
            "main()")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env |= {k: v for k, v in os.environ.items() if k.startswith(("EXPLORER_", "XDG_"))}
    return StdioServerParameters(command=sys.executable, args=["-c", code, str(data_dir)], env=env, cwd=str(ROOT))


async def call(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    """A tool's structured answer; an error result fails the test with its text."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    answer: dict[str, Any] = result.structured_content
    return answer


def assert_bounded_twin(tool: Any, twin: Any, path: str = "") -> None:
    """`tool` is `twin` bounded: every field of the twin's equal (the `*_human` twins and `truncated` lines aside), a
    list a prefix of the twin's list, a cut text the start of the twin's text."""
    if isinstance(twin, dict):
        assert isinstance(tool, dict), path
        for key, value in tool.items():
            if key == "truncated" or (key.endswith("_human") and key[:-6] + "_ns" in tool):
                continue
            assert key in twin, f"{path}.{key} is not in the HTTP answer"
            assert_bounded_twin(value, twin[key], f"{path}.{key}")
    elif isinstance(twin, list):
        assert isinstance(tool, list) and len(tool) <= len(twin), path
        for i, (a, b) in enumerate(zip(tool, twin, strict=False)):
            assert_bounded_twin(a, b, f"{path}[{i}]")
    elif isinstance(twin, str) and isinstance(tool, str) and tool != twin:
        head, _, tail = tool.partition("… [")
        assert twin.startswith(head) and tail.endswith("more characters]"), path
    else:
        assert tool == twin, f"{path}: {tool!r} != {twin!r}"
