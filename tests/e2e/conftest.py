"""Browser test harness: the real server on a free port, Debian's chromium driven by Playwright.

Every page a test opens fails the test on a request to any host other than the explorer, on any
JavaScript dialog (an XSS canary) and on any uncaught page error. Screenshots go to
$SCREENSHOT_DIR (default test-artifacts/screenshots). Needs `chromium` (`make browser` installs
Debian's package); set REQUIRE_BROWSER=1 (CI does) to fail instead of skip when it is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import urlopen

import pytest

from tests.helpers.support import free_port

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = Path(os.environ.get("SCREENSHOT_DIR", str(ROOT / "test-artifacts" / "screenshots")))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]
LOCAL_HOSTS = {"127.0.0.1", "localhost", ""}
HOSTILE_NAMES = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')

TORCH_SCRIPT = r"""
import sys, torch
from torch.profiler import profile, ProfilerActivity
torch.set_num_threads(1)  # the tests run beside a server and a browser on a small machine
variant, out = sys.argv[1], sys.argv[2]
x, w = torch.randn(64, 512), torch.ones(512)
def naive(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
def fused(x, w):
    return torch.rms_norm(x, (512,), w, 1e-6)
fn = naive if variant == "naive" else fused
for _ in range(2):
    fn(x, w)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(3):
        fn(x, w)
prof.export_chrome_trace(out)
"""


def chromium_path() -> str | None:
    for cand in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and Path(cand).exists():
            return cand
    return None


def hostile_trace() -> dict[str, Any]:
    """A Chrome trace whose names, categories, args and thread name try to inject markup."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": HOSTILE_NAMES[1]}},
    ]
    t = 0
    for i in range(6):
        name = HOSTILE_NAMES[i % 2]
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 2, "ts": t, "dur": 50,
                       "args": {"Input Dims": [[2, 2]], HOSTILE_NAMES[0]: HOSTILE_NAMES[1]}})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 2, "ts": t + 5,
                       "dur": 20, "args": {"note": HOSTILE_NAMES[0]}})
        t += 80
    events.append({"ph": "B", "name": HOSTILE_NAMES[0], "pid": 1, "tid": 3, "ts": 10})  # unpaired -> warning
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def with_counters(path: Path) -> None:
    """Add a memory counter series (Chrome "C" events) across the trace, for the counter lane."""
    trace = json.loads(path.read_text())
    ts = [e["ts"] for e in trace["traceEvents"] if "ts" in e]
    lo, hi = min(ts), max(ts)
    for i in range(200):
        t = lo + (hi - lo) * i / 199
        trace["traceEvents"].append({"ph": "C", "name": "memory", "pid": 4242, "tid": 0, "ts": t,
                                     "args": {"allocated_mb": 100 + 80 * ((i * 37) % 17) / 17 + i * 0.5}})
    path.write_text(json.dumps(trace))


@dataclass
class Traces:
    naive: Path
    fused: Path
    hostile: Path
    synth: Path


@pytest.fixture(scope="session")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Traces:
    d = tmp_path_factory.mktemp("traces")
    script = d / "profile_rmsnorm.py"
    script.write_text(TORCH_SCRIPT)
    procs = [subprocess.Popen([sys.executable, str(script), v, str(d / f"rmsnorm_{v}.json")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for v in ("naive", "fused")]
    (d / "hostile.json").write_text(json.dumps(hostile_trace()))
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from synth import write_kineto_trace
    finally:
        sys.path.remove(str(ROOT / "bench"))
    write_kineto_trace(d / "synth.json", 1200)
    with_counters(d / "synth.json")
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-2000:]
    return Traces(d / "rmsnorm_naive.json", d / "rmsnorm_fused.json", d / "hostile.json", d / "synth.json")


@dataclass
class Server:
    url: str
    state: Any
    runs: dict[str, str] = field(default_factory=dict)  # name -> id of runs ingested up front


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, traces: Traces) -> Iterator[Server]:
    from api.app import create_app
    from explorer.config import Settings
    from explorer.runs.ingest import ingest_paths

    settings = Settings(data_dir=tmp_path_factory.mktemp("data"))
    app = create_app(settings)
    state = app.state.explorer
    runs = {}
    for name, path in (("fused", traces.fused), ("hostile", traces.hostile), ("synth", traces.synth)):
        runs[name] = ingest_paths(state.store, [path], f"rmsnorm {name}" if name == "fused" else name).id
    with serving(app) as url:
        yield Server(url, state, runs)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` served by uvicorn in a thread on a free port (its lifespan runs); yields its URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urlopen(url + "/-/health", timeout=1):
                break
        except OSError:
            time.sleep(0.05)
    else:
        raise RuntimeError("server did not start")
    try:
        yield url
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    exe = chromium_path()
    if exe is None:
        msg = "chromium is not installed (make browser, or apt-get install -y chromium)"
        if os.environ.get("REQUIRE_BROWSER"):
            pytest.fail(msg)
        pytest.skip(msg)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


@dataclass
class Guard:
    """What a page did that it must not: external requests, dialogs, uncaught errors."""

    external: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def check(self) -> None:
        assert not self.external, f"requests to other hosts: {self.external}"
        assert not self.dialogs, f"a dialog fired (script injection?): {self.dialogs}"
        assert not self.errors, f"uncaught page errors: {self.errors}"


def guard_page(page: Any, offline: bool = False) -> Guard:
    guard = Guard()

    def route(r: Any) -> None:
        url = r.request.url
        parsed = urlparse(url)
        local = parsed.scheme in ("data", "blob", "about") or (parsed.scheme == "file" and offline) or (
            parsed.scheme in ("http", "https", "ws") and parsed.hostname in LOCAL_HOSTS and not offline)
        if local:
            r.continue_()
        else:
            guard.external.append(url)
            r.abort()

    page.route("**/*", route)

    def on_dialog(d: Any) -> None:
        guard.dialogs.append(f"{d.type}: {d.message}")
        d.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: guard.errors.append(str(exc)))
    # console errors catch what is not an exception: CSP violations, failed loads of our own assets
    page.on("console", lambda msg: guard.errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    return guard


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
    pg = context.new_page()
    pg.set_default_timeout(15000)
    guard = guard_page(pg)
    pg.guard = guard
    yield pg
    context.close()
    guard.check()


@pytest.fixture
def offline_page(browser: Any) -> Iterator[Any]:
    """A page with the network off: only file:, data: and blob: URLs load."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, offline=True)
    pg = context.new_page()
    pg.set_default_timeout(15000)
    guard = guard_page(pg, offline=True)
    pg.guard = guard
    yield pg
    context.close()
    guard.check()


@pytest.fixture(scope="session")
def shot() -> Any:
    """shot(page, name): a screenshot into SCREENSHOT_DIR for reviewers."""
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str, full_page: bool = False) -> Path:
        path = SCREENSHOT_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return take
