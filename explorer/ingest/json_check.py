"""Whether msgspec takes a Chrome/Kineto file as it stands: the check beside DuckDB's reader (chrome_fast).

DuckDB's reader takes what msgspec refuses (NaN, trailing commas, nesting past msgspec's depth, `true` as a
time); such a file goes to the msgspec path, which decides what to make of it, so both paths give the same
answer. The check is one msgspec decode of the whole file, which holds the GIL from start to end (~0.5 s per
210 MB): in the ingest's own process it stalled every other Python thread for that long, a server's
request handling included (seconds on a 2 GB upload). So it runs in a process of its own
(`python -m explorer.ingest.json_check FILE`, which imports msgspec and nothing of the explorer's), its
memory (the file's mapped pages, one small struct per event) is not the ingest's, and it prints its answer
as one line of JSON: {"refused": null} or {"refused": "why"}.
"""

from __future__ import annotations

import json
import mmap
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec


class EventTimes(msgspec.Struct, gc=False):
    """Event's time fields, for checking a file the DuckDB path reads: its reader casts a JSON `true` to the
    time 1 where Event refuses the event as mistyped. Checked, not kept: float, not Decimal, so no Decimal
    is built per event. The other fields are skipped, which still checks their JSON, not their types (the
    string fields' types would double the check's cost: tests/ingest/test_parser_paths.py)."""

    ts: int | float | str | None = None
    dur: int | float | str | None = None


class _TypesDoc(msgspec.Struct):
    traceEvents: list[EventTimes] = []  # noqa: N815 - the format's name


_CHECK_ARRAY = msgspec.json.Decoder(list[EventTimes], strict=False)
_CHECK_DOC = msgspec.json.Decoder(_TypesDoc, strict=False)

# msgspec's depth limit is the recursion limit less the frames already on the stack: a fresh process has
# almost none, the msgspec path has its caller's. Checked this many frames down, the check refuses nesting
# a little shallower than the msgspec path would, never deeper (such a file then takes the msgspec path).
CHECK_DEPTH_MARGIN = 200
DROP_PAGES_S = 0.02


def refusal(body: bytes | memoryview) -> str | None:
    """Why decode_events would not read this document straight into Events, or None when it would: JSON
    msgspec does not accept (NaN, Infinity, a trailing comma, nesting past its depth limit) or an event
    time of a type Event refuses (`true`)."""
    try:
        (_CHECK_ARRAY if bytes(body[:4096]).lstrip()[:1] == b"[" else _CHECK_DOC).decode(body)
    except (msgspec.MsgspecError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _with_frames(frames: int, call: Callable[[], str | None]) -> str | None:
    """call() with `frames` more Python frames on the stack (a fixed count, not user data)."""
    return call() if frames <= 0 else _with_frames(frames - 1, call)


@contextmanager
def _pages_dropped(m: mmap.mmap) -> Iterator[None]:
    """While the check reads the mapping front to back (one msgspec call), its pages are dropped from the
    process every DROP_PAGES_S: a mapped file's pages count in the RSS (up to the whole file), and the few
    the decoder is on fault back from the page cache."""
    stop = threading.Event()

    def drop() -> None:
        while not stop.wait(DROP_PAGES_S):
            m.madvise(mmap.MADV_DONTNEED)

    dropper = threading.Thread(target=drop, name="json-check-pages", daemon=True)
    dropper.start()
    try:
        yield
    finally:
        stop.set()
        dropper.join()


def check_file(path: Path) -> str | None:
    """refusal() of a file, read through a mapping of it."""
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m, \
                memoryview(m) as view, _pages_dropped(m):
            return _with_frames(CHECK_DEPTH_MARGIN, lambda: refusal(view))
    except (OSError, ValueError) as exc:
        return f"not checked ({exc})"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m explorer.ingest.json_check FILE", file=sys.stderr)
        return 2
    print(json.dumps({"refused": check_file(Path(argv[0]))}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
