"""Run a fuzz corpus through the real ingest (explorer.runs.ingest.run_ingest, as the CLI and the API do) in a
pool of worker processes, and classify every outcome.

Each input is ingested into a RunStore in the worker's own data folder, JSON documents three times: on the
msgspec path, on the compiled reader and on DuckDB's (chrome_fast.FAST_MIN_BYTES forced to 0; FAST_PATHS). An outcome is `ok`, or
`error:<code>` for a typed ExplorerError whose message is one line and names the file, the failed run stores
that message, and nothing of the run is left in runs/ or tmp/. Anything else is a finding: `traceback:<type>`
(an exception that is not an ExplorerError), `guard` (the ingest_bug guard fired: a parser bug), `timeout`
(over the time bound), `unclear` (message not one line / not naming the file), `leftover` (files left
behind), `crash` (the worker process died on this input).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.fuzz.corpus import FuzzInput

TIME_BOUND_S = 10.0  # per ingest
RSS_BOUND_MB = 2048  # peak resident memory of a worker process
BATCH = 40
FAST_PATHS = ("native", "duckdb")  # the compiled reader, DuckDB's (read as where the library is not built)
_NATIVE: Any = None  # the compiled reader's library, kept while a DuckDB-path ingest runs without it


@dataclass
class Outcome:
    name: str
    kind: str
    path: str  # "msgspec", "native", "duckdb" (JSON inputs) or "default"
    outcome: str  # ok | error:<code> | a finding (see the module doc)
    seconds: float
    rss_mb: float  # the worker's peak RSS after this input
    size: int
    message: str = ""

    @property
    def finding(self) -> bool:
        return not (self.outcome == "ok" or self.outcome.startswith("error:"))


class _Timeout(Exception):
    pass


class _BugLog(logging.Handler):
    """Counts the guard's bug reports (ERROR records of explorer.runs.ingest)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_BUGS = _BugLog()


@contextmanager
def _time_bound(seconds: float) -> Iterator[None]:
    def alarm(signum: int, frame: Any) -> None:
        raise _Timeout(f"over {seconds:g} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _init_worker() -> None:
    logging.getLogger("explorer.runs.ingest").addHandler(_BUGS)
    logging.getLogger("explorer.runs.ingest").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.CRITICAL)  # parsers' info/warning logs are not findings


def _leftovers(store: Any, run_id: str, ok: bool) -> list[str]:
    left = [str(p) for p in store.tmp_dir.iterdir()]
    if not ok and store.run_dir(run_id).exists():
        left.append(str(store.run_dir(run_id)))
    left += [str(p) for p in Path(tempfile.gettempdir()).iterdir()]  # the worker's own TMPDIR
    return left


def _ingest_one(store: Any, item: FuzzInput, target: Path, path_mode: str) -> tuple[str, str]:
    from explorer.errors import ExplorerError, IngestBug
    from explorer.ingest.chrome import fast as chrome_fast
    from explorer.ingest.chrome import kscan
    from explorer.runs.ingest import run_ingest

    global _NATIVE
    chrome_fast.FAST_MIN_BYTES = 0 if path_mode in FAST_PATHS else (_FAST_DEFAULT or chrome_fast.FAST_MIN_BYTES)
    _NATIVE = _NATIVE or kscan._LIB
    kscan._LIB = _NATIVE if path_mode == "native" else None  # DuckDB's path: as an install without the library
    rec = store.catalog.create(item.name[:100], source=target.name)
    bugs_before = len(_BUGS.records)
    try:
        with _time_bound(TIME_BOUND_S):
            run_ingest(store, rec.id, [target], keep_failed=True)
    except _Timeout as exc:
        store.catalog.delete(rec.id)
        return "timeout", str(exc)
    except IngestBug as exc:
        report = _BUGS.records[-1] if len(_BUGS.records) > bugs_before else None
        tb = "".join(traceback.format_exception(*report.exc_info)) if report and report.exc_info else "no log record"
        return "guard", f"{exc.message} | {tb[-2500:]}"
    except ExplorerError as exc:
        stored = store.get(rec.id)
        problems = []
        if "\n" in exc.message or not _names_a_file(exc.message, item, target):
            problems.append("unclear")
        if (stored.status, stored.message) != ("failed", exc.message):
            problems.append(f"failed run stores {stored.status!r} {stored.message!r}")
        left = _leftovers(store, rec.id, ok=False)
        if left:
            problems.append(f"leftover {left[:3]}")
        store.delete(rec.id)
        if problems:
            return ("unclear" if problems == ["unclear"] else "leftover"), f"{exc.message} | {problems}"
        return f"error:{exc.code}", exc.message
    except BaseException as exc:  # noqa: BLE001 - a finding, reported with its traceback
        return f"traceback:{type(exc).__name__}", "".join(traceback.format_exception(exc))[-3000:]
    left = _leftovers(store, rec.id, ok=True)
    store.delete(rec.id)
    if left:
        return "leftover", f"ok but left {left[:3]}"
    return "ok", ""


def _names_a_file(message: str, item: FuzzInput, target: Path) -> bool:
    """A clear error names the file: the input's name or one of its members' (archives, folders)."""
    head = message.split(": ", 1)[0]
    names = {target.name, *(Path(rel).name for rel in item.files), *(Path(rel).parts[0] for rel in item.files)}
    names |= {n.removesuffix(".gz") for n in names}
    return any(n and n in head for n in names)


_FAST_DEFAULT = 0


def peak_rss_mb() -> float:
    """This worker's own peak RSS: VmHWM starts afresh at exec, while ru_maxrss keeps the forking parent's
    peak (a pytest process grown to 2 GB by earlier tests made every worker look 2 GB big)."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):  # not Linux: the portable, parent-inclusive figure
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_batch(items: list[FuzzInput], work: str, progress: Path | None = None) -> list[Outcome]:
    """Worker side: ingest each item on each of its parser paths; with `progress`, each ingest's start and
    outcome are appended there as JSON lines as they happen (the parent reads them after a hang)."""
    global _FAST_DEFAULT
    from explorer.ingest.chrome import fast as chrome_fast
    from explorer.store.runs import RunStore

    if not _FAST_DEFAULT:
        _FAST_DEFAULT = chrome_fast.FAST_MIN_BYTES
    root = Path(tempfile.mkdtemp(prefix="batch-", dir=work))
    own_tmp = root / "tmp"
    own_tmp.mkdir()
    os.environ["TMPDIR"] = str(own_tmp)
    tempfile.tempdir = str(own_tmp)
    store = RunStore(root / "data")
    out: list[Outcome] = []
    log = progress.open("a") if progress else None
    try:
        for i, item in enumerate(items):
            folder = root / "in" / str(i)
            folder.mkdir(parents=True)
            target = item.write(folder)
            for mode in ("msgspec", *FAST_PATHS) if item.json else ("default",):
                if log:
                    log.write(json.dumps({"start": item.name, "path": mode}) + "\n")
                    log.flush()
                t0 = time.perf_counter()
                outcome, message = _ingest_one(store, item, target, mode)
                seconds = time.perf_counter() - t0
                rss = peak_rss_mb()
                if outcome.startswith("error:") or outcome == "ok":
                    message = message[:300]
                out.append(Outcome(item.name, item.kind, mode, outcome, round(seconds, 4), round(rss, 1),
                                   item.size, message))
                if log:
                    log.write(json.dumps({"done": asdict(out[-1])}) + "\n")
                    log.flush()
            shutil.rmtree(folder)
    finally:
        tempfile.tempdir = None
        shutil.rmtree(root, ignore_errors=True)
        if log:
            log.close()
    return out


HARD_BOUND_S = 3 * TIME_BOUND_S  # an ingest the SIGALRM bound cannot stop (stuck in C code) is killed here


def _worker_main(corpus_file: str, first: int, last: int, work: str, progress: str) -> None:
    _init_worker()
    items = pickle.loads(Path(corpus_file).read_bytes())[first:last]
    run_batch(items, work, Path(progress))


def _run_span(corpus_file: Path, items: list[FuzzInput], first: int, work: Path, n: int) -> list[Outcome]:
    """One batch in a fresh interpreter; an ingest past HARD_BOUND_S or a dead worker is an outcome of its
    own (`timeout` / `crash`), and the batch goes on from the next input in a new interpreter."""
    results: list[Outcome] = []
    at = first
    last = first + len(items)
    while at < last:
        progress = work / f"progress-{at}-{n}.jsonl"
        code = ("import sys; from tests.fuzz.runner import _worker_main; "
                "_worker_main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])")
        proc = subprocess.Popen([sys.executable, "-c", code, str(corpus_file), str(at), str(last), str(work),
                                 str(progress)], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        started: tuple[str, str, float] | None = None
        seen = 0
        killed = False
        while proc.poll() is None:
            time.sleep(0.2)
            started, seen = _read_progress(progress, started, seen, results)
            if started and time.monotonic() - started[2] > HARD_BOUND_S:
                proc.kill()
                killed = True
        proc.wait()
        started, seen = _read_progress(progress, started, seen, results)
        if started is None:
            break  # every input of the span is done
        name, mode, _t = started
        item = next(i for i in items if i.name == name)
        results.append(Outcome(name, item.kind, mode, "timeout" if killed else "crash",
                               HARD_BOUND_S if killed else 0.0, 0.0, item.size,
                               f"killed after {HARD_BOUND_S:g} s" if killed else f"worker exited {proc.returncode}"))
        done = {o.name for o in results}
        at = first + next((k for k, i in enumerate(items) if i.name not in done), len(items))
    return results


def _read_progress(path: Path, started: tuple[str, str, float] | None, seen: int,
                   results: list[Outcome]) -> tuple[tuple[str, str, float] | None, int]:
    if not path.exists():
        return started, seen
    lines = path.read_text().splitlines()
    for line in lines[seen:]:
        try:
            entry = json.loads(line)
        except ValueError:
            break  # a line being written
        seen += 1
        if "start" in entry:
            started = (entry["start"], entry["path"], time.monotonic())
        else:
            results.append(Outcome(**entry["done"]))
            started = None
    return started, seen


def run_corpus(corpus: list[FuzzInput], work: Path, workers: int = 2, batch: int = BATCH) -> list[Outcome]:
    """Parent side: batches of `batch` inputs run `workers` at a time, each in a fresh interpreter watched
    by a thread here (see _run_span)."""
    spans = [(i, corpus[i:i + batch]) for i in range(0, len(corpus), batch)]

    def run(span: tuple[int, list[FuzzInput]]) -> list[Outcome]:
        span_file = work / f"span-{span[0]}.pickle"  # a worker loads its own inputs only (RSS is measured)
        span_file.write_bytes(pickle.dumps(span[1]))
        try:
            return _run_span(span_file, span[1], 0, work, span[0])
        finally:
            span_file.unlink()

    with ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(run, spans))
    return [o for part in parts for o in part]


def figures(outcomes: list[Outcome]) -> dict[str, Any]:
    """What the corpus run prints: inputs, ingests, classes with counts, the slowest ingest, the largest RSS."""
    slowest = max(outcomes, key=lambda o: o.seconds)
    largest = max(outcomes, key=lambda o: o.rss_mb)
    return {
        "inputs": len({o.name for o in outcomes}),
        "ingests": len(outcomes),
        "classes": dict(Counter(o.outcome for o in outcomes).most_common()),
        "kinds": dict(Counter(o.kind for o in outcomes if o.path not in FAST_PATHS).most_common()),
        "total_s": round(sum(o.seconds for o in outcomes), 1),
        "slowest": {"input": slowest.name, "path": slowest.path, "seconds": slowest.seconds, "bytes": slowest.size},
        "largest_rss_mb": {"input": largest.name, "path": largest.path, "rss_mb": largest.rss_mb},
        "paths_disagree": disagreements(outcomes)[:20],
        "findings": [asdict(o) for o in outcomes if o.finding][:50],
    }


def disagreements(outcomes: list[Outcome]) -> list[str]:
    """JSON inputs whose parser paths ended differently (a fast path unlike the msgspec path): ok on one and an error on the other, two
    different errors, or the same error worded differently (the user reads the message). An input with a
    finding on either path is left to the findings (a timeout is not a disagreement about the input)."""
    by_name: dict[str, dict[str, tuple[str, str]]] = {}
    findings = {o.name for o in outcomes if o.finding}
    for o in outcomes:
        by_name.setdefault(o.name, {})[o.path] = (o.outcome, o.message)
    return [f"{n}: {p}" for n, p in by_name.items()
            if any(m in p and p[m] != p.get("msgspec") for m in FAST_PATHS) and n not in findings]


def format_figures(fig: dict[str, Any]) -> str:
    lines = [f"fuzz corpus: {fig['inputs']} inputs, {fig['ingests']} ingests (JSON on every parser path), "
             f"{fig['total_s']} s of ingest",
             "  classes: " + ", ".join(f"{k} {v}" for k, v in fig["classes"].items()),
             "  kinds: " + ", ".join(f"{k} {v}" for k, v in fig["kinds"].items()),
             f"  slowest: {fig['slowest']['input']} ({fig['slowest']['path']}, {fig['slowest']['bytes']:,} bytes) "
             f"{fig['slowest']['seconds']:.2f} s",
             f"  largest RSS: {fig['largest_rss_mb']['rss_mb']:.0f} MB after {fig['largest_rss_mb']['input']} "
             f"({fig['largest_rss_mb']['path']})"]
    lines += [f"  paths disagree: {d}" for d in fig["paths_disagree"]]
    lines += [f"  FINDING {f['outcome']} {f['name']} ({f['path']}): {f['message'][-400:]}" for f in fig["findings"]]
    return "\n".join(lines)
