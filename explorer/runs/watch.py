"""Log folders like TensorBoard's: a thread that polls folders and ingests each trace once it is complete.

When a file is complete, how files are named and grouped into runs, and what was ingested already (a
ledger in the data folder, so a restart ingests nothing twice) are here. Parsing and saving are
explorer.runs.ingest's; the server starts and stops the thread (api/app.py).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from explorer.config import Settings
from explorer.ingest.capture import is_process_folder_name
from explorer.ingest.detect import Format, detect_format
from explorer.ingest.limits import IngestLimits
from explorer.ingest.sources import DEFAULT_MAX_BYTES
from explorer.runs.ingest import run_ingest
from explorer.runs.ingesters import Ingester
from explorer.runs.records import content_sha256
from explorer.store.runs import RunStore

log = logging.getLogger(__name__)

TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")  # torch.profiler / tensorboard_trace_handler
WATCH_TAG = "watch"  # every run the watcher makes carries it (`tag:watch@latest` in `check`)
LEDGER = "watch-ledger.json"
PEEK_BYTES = 8 << 20  # how much of a trace is read for its step number and rank
# a file counts as moved in only when last written this long before the previous scan: coarse mtimes
# (NFS, FAT: 1-2 s) must not make a file still being written look older than that scan
MTIME_SLACK_NS = 2_000_000_000
CLOSING = (ord("}"), ord("]"))

# tensorboard_trace_handler: f"{worker_name}.{time.time_ns()}.pt.trace.json" (older torch: ms)
_HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.(?P<stamp>\d{10,})$")
_STEP_IN_NAME = re.compile(r"(?:^|[._-])step[_-]?(?P<step>\d+)(?=$|[._-])", re.IGNORECASE)
_RANK_IN_NAME = re.compile(r"(?:^|[._-])rank[_-]?(?P<rank>\d+)(?=$|[._-])", re.IGNORECASE)
_STEP_IN_TRACE = re.compile(rb'"ProfilerStep#(\d+)"')
_JSON_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
_RANK_IN_TRACE = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')


@dataclass
class Sighting:
    """One watched item (a trace file, or a Neuron capture folder) across polls."""

    path: Path
    root: Path
    is_capture: bool
    signature: tuple[int, ...]  # (size, mtime_ns) of a file; (files, bytes, newest mtime_ns) of a folder
    changed_at: float  # monotonic time the signature last changed
    polls_stable: int = 0
    renamed: bool = False  # appeared by rename: the writer has finished
    complete_at: float | None = None
    closed: bool | None = None  # cached for this signature
    group: tuple[tuple[str, ...], str, int] | None = None  # group key, run name, rank: read once complete


@dataclass
class Group:
    """Complete files of one step in one folder (or one capture folder): what becomes one run."""

    key: tuple[str, ...]
    name: str
    items: list[Sighting] = field(default_factory=list)


def trace_label(path: Path) -> tuple[str, int | None, int | None]:
    """The worker label, step and rank a trace's file name carries: `host_12.1700000000000.pt.trace.json`
    -> ("host_12", None, None); `rank1.step5.pt.trace.json` -> ("rank1", 5, 1)."""
    stem = path.name
    for suffix in (*TRACE_SUFFIXES, ".json.gz", ".json"):
        if stem.endswith(suffix):
            stem = stem.removesuffix(suffix)
            break
    handler = _HANDLER_NAME.match(stem)
    step = _STEP_IN_NAME.search(stem)
    rank = _RANK_IN_NAME.search(stem)
    label = handler.group("worker") if handler else _STEP_IN_NAME.sub("", stem).strip("._-") or stem
    return label, int(step.group("step")) if step else None, int(rank.group("rank")) if rank else None


def peek_trace(path: Path, limit: int = PEEK_BYTES) -> tuple[int | None, int | None]:
    """The first ProfilerStep number and the `distributedInfo` rank found in the first `limit` bytes."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as f:
            head = f.read(limit)
    except (OSError, EOFError, zlib.error):
        return None, None
    steps = [int(m) for m in _STEP_IN_TRACE.findall(head)]
    rank = _RANK_IN_TRACE.search(head)
    return (min(steps) if steps else None), (int(rank.group(1)) if rank else None)


def is_closed(path: Path) -> bool:
    """Whether a trace file's JSON is finished: its brackets outside strings balance and its last non-blank
    byte closes it (`}` or `]`); a .gz file must also decompress to its end-of-stream marker. A writer
    paused right after an event's `}` leaves the brackets open, so a pause is never taken for the end."""
    depth, tail, carry = 0, b"", b""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as f:
            for chunk in iter(lambda: f.read(4 << 20), b""):
                # JSON strings hold no raw newline: whole lines are whole strings
                block, nl, carry = (carry + chunk).rpartition(b"\n")
                depth += _depth(block + nl)
                tail = (tail + chunk)[-64:]
            depth += _depth(carry)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return False
    tail = tail.rstrip()
    return depth == 0 and bool(tail) and tail[-1] in CLOSING


def _depth(text: bytes) -> int:
    bare = _JSON_STRING.sub(b"", text)
    return bare.count(b"{") + bare.count(b"[") - bare.count(b"}") - bare.count(b"]")


class Ledger:
    """What the watcher has ingested: path -> signature and run id, kept as JSON in the data folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, object]] = {}
        try:
            self.entries = json.loads(path.read_text()).get("items", {})
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError):
            log.warning("watch ledger %s is unreadable; starting a new one", path)

    def knows(self, item: Sighting) -> bool:
        entry = self.entries.get(str(item.path))
        return entry is not None and entry.get("signature") == list(item.signature)

    def record(self, items: list[Sighting], run_id: str) -> None:
        for item in items:
            self.entries[str(item.path)] = {"signature": list(item.signature), "run_id": run_id}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"items": self.entries}, indent=0))
        os.replace(tmp, self.path)


class Watcher:
    """Polls `roots` every `poll_s` and ingests what is complete (see docs/watch.md).

    A trace file is complete when it appeared by rename, or when its size and mtime did not change over
    two polls and its JSON is closed (or after `stale_s` unchanged, whatever it holds: the ingest then
    says what is wrong). A capture folder is complete when nothing under it changed for `settle_s`.
    Files of one step in one folder make one run, ingested `settle_s` after the last of them completed
    while no other trace file in that folder is still being written."""

    def __init__(self, store: RunStore, roots: list[Path], *, poll_s: float = 1.0, settle_s: float = 3.0,
                 stale_s: float = 60.0, max_bytes: int = DEFAULT_MAX_BYTES,
                 on_ready: Callable[[str], None] | None = None, limits: IngestLimits | None = None,
                 ingester: Ingester | None = None) -> None:
        """`ingester`: the server's (explorer.runs.ingesters): a ready group is ingested in a process of its own
        and waited for, or handed to the job queue's workers, so the server's own process parses nothing. None:
        the ingest runs in this process (the watcher's thread)."""
        self.store = store
        self.ingester = ingester
        self.limits = limits
        self.roots = [r.resolve() for r in roots]
        self.poll_s, self.settle_s, self.stale_s = poll_s, settle_s, stale_s
        self.max_bytes = max_bytes
        self.on_ready = on_ready
        self.ledger = Ledger(store.data_dir / LEDGER)
        self._data_dir = store.data_dir.resolve()
        self._items: dict[Path, Sighting] = {}
        self._last_scan_ns: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        log.info("watching %s", ", ".join(map(str, self.roots)))
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # a bad poll (a folder vanished mid-scan, ...) must not end the watching
                log.exception("watch poll failed")
            self._stop.wait(self.poll_s)

    def poll(self) -> list[str]:
        """One scan: update what was seen, ingest the groups that are ready; returns the new run ids."""
        scan_ns, now = time.time_ns(), time.monotonic()
        seen = dict(self._scan())
        for path in set(self._items) - set(seen):
            del self._items[path]  # deleted, or renamed away: forget it
        for path, (root, is_capture, signature) in seen.items():
            self._observe(path, root, is_capture, signature, now)
        self._last_scan_ns = scan_ns
        return [run_id for group in self._ready_groups(now) if (run_id := self._ingest(group))]

    def _scan(self) -> Iterator[tuple[Path, tuple[Path, bool, tuple[int, ...]]]]:
        for root in self.roots:
            if root.is_dir():
                yield from self._scan_dir(root, root)

    def _scan_dir(self, root: Path, folder: Path) -> Iterator[tuple[Path, tuple[Path, bool, tuple[int, ...]]]]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        if any(e.is_dir(follow_symlinks=False) and is_process_folder_name(e.name) for e in entries):
            yield folder, (root, True, _folder_signature(folder))
            return
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue  # hidden: a writer's temporary name before its rename
            path = Path(entry.path)
            if entry.is_dir():
                if path != self._data_dir:
                    yield from self._scan_dir(root, path)
            elif entry.name.endswith(TRACE_SUFFIXES):
                st = entry.stat()
                yield path, (root, False, (st.st_size, st.st_mtime_ns))

    def _observe(self, path: Path, root: Path, is_capture: bool, signature: tuple[int, ...], now: float) -> None:
        item = self._items.get(path)
        if item is None:
            item = self._items[path] = Sighting(path, root, is_capture, signature, now)
            # new since the last scan, yet last written before it: moved here whole
            item.renamed = (not is_capture and self._last_scan_ns is not None
                            and signature[1] < self._last_scan_ns - MTIME_SLACK_NS)
        elif item.signature != signature:
            item.signature, item.changed_at, item.polls_stable = signature, now, 0
            item.complete_at, item.closed, item.group = None, None, None
        else:
            item.polls_stable += 1
        if item.complete_at is None and not self.ledger.knows(item) and self._complete(item, now):
            item.complete_at, item.group = now, group_of(item)

    def _complete(self, item: Sighting, now: float) -> bool:
        if item.is_capture:
            return item.polls_stable >= 1 and now - item.changed_at >= self.settle_s
        if item.renamed:
            return True
        if item.polls_stable < 1:
            return False
        if item.closed is None:
            item.closed = is_closed(item.path)
        return item.closed or now - item.changed_at >= self.stale_s

    def _ready_groups(self, now: float) -> list[Group]:
        groups: dict[tuple[str, ...], Group] = {}
        busy: set[Path] = set()  # folders with a trace file still being written
        for item in self._items.values():
            if self.ledger.knows(item):
                continue
            if item.complete_at is None or item.group is None:
                busy.add(item.path.parent)
                continue
            key, name, _rank = item.group
            groups.setdefault(key, Group(key, name)).items.append(item)
        ready = []
        for group in groups.values():
            last = max(i.complete_at or now for i in group.items)
            if group.items[0].is_capture or (group.items[0].path.parent not in busy and now - last >= self.settle_s):
                ready.append(group)
        return ready

    def _ingest(self, group: Group) -> str | None:
        items = sorted(group.items, key=lambda i: (i.group[2] if i.group else -1, i.path.name))
        paths = [i.path for i in items]
        try:
            sha = content_sha256(paths)
        except OSError as exc:  # vanished between the scan and now: the next scan decides
            log.warning("watch: %s: %s", paths[0], exc)
            return None
        existing = self.store.catalog.find_by_sha(sha)
        if existing is not None:
            log.info("watch: %s is already run %s", ", ".join(map(str, paths)), existing.id)
            self.ledger.record(items, existing.id)
            return None
        name = group_name(group)
        rec = self.store.catalog.create(name[:200], source=", ".join(str(p) for p in paths), sha256=sha)
        self.store.catalog.set_tags(rec.id, [WATCH_TAG])
        try:
            if self.ingester is not None:
                done = self.ingester.ingest_paths(rec.id, paths)
                if done is None:  # handed to the queue's workers: the run gets ready there
                    self.ledger.record(items, rec.id)
                    log.info("watch: run %s (%s) queued for the workers", rec.id, name)
                    return rec.id
                ready = done
                if not ready:
                    log.warning("watch: ingest of %s failed (run %s says why)", name, rec.id)
            else:
                run_ingest(self.store, rec.id, paths, keep_failed=True, max_bytes=self.max_bytes,
                           limits=self.limits)
                ready = True
        except Exception as exc:  # the run is marked failed with the message; the watching goes on
            ready = False
            log.warning("watch: ingest of %s failed: %s", name, exc)
        self.ledger.record(items, rec.id)  # a bad file is not retried; one killed mid-ingest is
        if not ready:  # (its message is the run's, in the catalog)
            return rec.id
        log.info("watch: run %s (%s) ingested", rec.id, name)
        if self.on_ready is not None:
            self.on_ready(rec.id)
        return rec.id


def _is_chrome_trace(path: Path) -> bool:
    """Whether a file's first bytes are a Chrome / Kineto trace (not a Neuron JSON export or an execution trace,
    which belong with the trace beside them)."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as f:
            return detect_format(f.read(65536)) is Format.CHROME
    except (OSError, EOFError, zlib.error):
        return False


def group_of(item: Sighting) -> tuple[tuple[str, ...], str, int]:
    """The group key, run name and rank (-1: unknown) of a complete item. A capture folder is its own run,
    named by its path under the watched folder. A trace file joins the files of the same folder with the
    same step (from its name, else the first ProfilerStep#N inside); without a step it is a run of its own."""
    if item.is_capture:
        return ("capture", str(item.path)), folder_label(item.root, item.path), -1
    label, step, rank = trace_label(item.path)
    if step is None or rank is None:
        seen_step, seen_rank = peek_trace(item.path)
        step, rank = (seen_step if step is None else step), (seen_rank if rank is None else rank)
    base, rank = folder_label(item.root, item.path.parent), -1 if rank is None else rank
    if step is None:
        return ("file", str(item.path)), f"{base}/{label}", rank
    return ("step", str(item.path.parent), str(step)), f"{base}/{label} step {step}", rank


def group_name(group: Group) -> str:
    """A group of several ranks is named by its folder and step, with how many files it joins."""
    if len(group.items) < 2:
        return group.name
    first = group.items[0]
    return f"{folder_label(first.root, first.path.parent)} step {group.key[-1]} ({len(group.items)} ranks)"


def folder_label(root: Path, folder: Path) -> str:
    """A folder as run names show it: the watched folder's name, then the path below it."""
    rel = folder.relative_to(root).as_posix()
    return root.name if rel == "." else f"{root.name}/{rel}"


def _folder_signature(folder: Path) -> tuple[int, ...]:
    count = size = newest = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            try:
                st = os.stat(os.path.join(dirpath, name), follow_symlinks=False)
            except OSError:
                continue
            count, size, newest = count + 1, size + st.st_size, max(newest, st.st_mtime_ns)
    return count, size, newest


PLAIN_TRACE_SUFFIXES = (".json", ".json.gz")  # what a folder of Kineto / Chrome traces holds, and nothing else


@dataclass(frozen=True)
class PlannedRun:
    """The files `ingest DIR` makes one run of, and the name the watcher would give them."""

    paths: tuple[Path, ...]
    name: str


def plan_runs(paths: list[Path]) -> list[PlannedRun] | None:
    """How `ingest DIR` splits one folder of traces into runs, as `serve --watch` does: the files of one step
    in one folder together (ranks of one step, or rank files without steps), every other trace a run of its
    own. None when the paths are one run as given: several paths, a file, a capture folder, or a folder that
    holds anything but trace JSON (a Neuron bundle's Parquet, NEFF and NTFF files belong together)."""
    if len(paths) != 1 or not paths[0].is_dir():
        return None
    root = paths[0]
    files = sorted(f for f in root.rglob("*") if f.is_file() and not f.name.startswith("."))
    if (not files or any(d.is_dir() and is_process_folder_name(d.name) for d in root.rglob("*"))
            or not all(f.name.endswith(PLAIN_TRACE_SUFFIXES) and _is_chrome_trace(f) for f in files)):
        return None
    groups: dict[tuple[str, ...], list[tuple[int, Path]]] = {}
    names: dict[tuple[str, ...], str] = {}
    for file in files:
        key, name, rank = group_of(Sighting(file, root, False, (0, 0), 0.0))
        if key[0] == "file" and rank >= 0:  # rank files without steps: the ranks of one run
            key = ("ranks", str(file.parent))
        groups.setdefault(key, []).append((rank, file))
        names.setdefault(key, name)
    if len(groups) < 2:
        return None
    plan = []
    for key, members in groups.items():
        ordered = tuple(p for _rank, p in sorted(members, key=lambda m: (m[0], m[1].name)))
        if len(ordered) > 1:
            where = folder_label(root, ordered[0].parent)
            names[key] = f"{where} step {key[-1]}" if key[0] == "step" else where
            names[key] += f" ({len(ordered)} ranks)"
        plan.append(PlannedRun(ordered, names[key]))
    return plan


def make_watcher(settings: Settings, store: RunStore, ingester: Ingester,
                 on_ready: Callable[[str], None]) -> Watcher | None:
    """The log-folder watcher of `serve --watch DIR`, None when nothing is watched."""
    s = settings
    if not s.watch_dirs:
        return None
    return Watcher(store, s.watch_dirs, poll_s=s.watch_poll_s, settle_s=s.watch_settle_s, stale_s=s.watch_stale_s,
                   max_bytes=s.max_uncompressed_bytes, on_ready=on_ready, limits=IngestLimits.from_settings(s),
                   ingester=ingester)
