"""Whether msgspec takes a Chrome/Kineto file as it stands, checked beside DuckDB's reader (chrome.fast) so
both paths give the same answer. Run as its own process (`python -m explorer.ingest.chrome.json_check FILE`)
because the decode holds the GIL; it prints {"refused": null | "why"}. Why: docs/architecture.md,
"ingest/chrome/json_check.py"."""

from __future__ import annotations

import json
import mmap
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec


class CheckedEvent(msgspec.Struct, gc=False):
    """An event's typed fields, for checking a file the DuckDB path reads: its reader takes `true` as the time
    1 and a number or `true` as a name or pid (as text), where the msgspec path's Event refuses the event as
    mistyped. Checked, not kept: Event's fields and types (a test says so) but the times as float, not
    Decimal, so no Decimal is built per event; the args and id2, which Event keeps as raw JSON, are only
    checked as JSON. Typing the text fields costs the check about twice the time of the times alone, in a
    process of its own, on the DuckDB path only (an install without the compiled reader, or a file it
    refuses)."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: int | float | str | None = None
    dur: int | float | str | None = None
    pid: int | str = 0
    tid: int | str = 0
    id: int | str | None = None
    bp: str = ""
    s: str = ""
    scope: str = ""


class _TypesDoc(msgspec.Struct):
    traceEvents: list[CheckedEvent] = []  # noqa: N815 - the format's name


_CHECK_ARRAY = msgspec.json.Decoder(list[CheckedEvent], strict=False)
_CHECK_DOC = msgspec.json.Decoder(_TypesDoc, strict=False)

# msgspec's depth limit is the recursion limit less the frames already on the stack: a fresh process has
# almost none, the msgspec path has its caller's. Checked this many frames down, the check refuses nesting
# a little shallower than the msgspec path would, never deeper (such a file then takes the msgspec path).
CHECK_DEPTH_MARGIN = 200
DROP_PAGES_S = 0.02


def refusal(body: bytes | memoryview) -> str | None:
    """Why decode_events would not read this document straight into Events, or None when it would: JSON
    msgspec does not accept (NaN, Infinity, a trailing comma, nesting past its depth limit) or an event
    field of a type Event refuses (`true` as a time or a pid, a number as a name)."""
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


PIECE_BYTES = 8 * 2**20  # events decoded this many bytes at a time (see pieces())
BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")


def check_file(path: Path) -> str | None:
    """refusal() of a file, read through a mapping of it: piece by piece where pieces() finds the events
    array's pieces, else the whole file at once."""
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m, \
                memoryview(m) as view, _pages_dropped(m):
            cut = pieces(m) if len(m) > PIECE_BYTES else None
            if cut is not None and _with_frames(CHECK_DEPTH_MARGIN, lambda: _pieces_refused(m, *cut)) is None:
                return None
            return _with_frames(CHECK_DEPTH_MARGIN, lambda: refusal(view))
    except (OSError, ValueError) as exc:
        return f"not checked ({exc})"


def pieces(m: mmap.mmap) -> tuple[bytes, list[tuple[int, int]]] | None:
    """The file as a document with an empty events array (the array form: `[]`) and the events array's
    contents cut into pieces of about PIECE_BYTES, each cut between two events (`}`, a comma, `{`, with
    whitespace around the comma only); None where that cannot be seen cheaply.

    Decoding the pieces one at a time holds one piece's events, not the file's (one small struct and its
    times per event: ~300 MB for the 1M-event trace). It refuses exactly what the whole decode refuses:
    the document decodes when the wrapper and every piece do, since it is the wrapper with the pieces joined
    by commas in its array; and a cut that is not between two top-level events (inside a string, or inside
    an event's args) leaves the piece before it with a string or a bracket not closed, so that piece does
    not decode, and the whole file is decoded instead. The events sit one level less deep in a piece than in
    an object document: within CHECK_DEPTH_MARGIN."""
    start = 0
    while start < len(m) and m[start:start + 1] in b" \t\r\n":
        start += 1
    end = len(m)
    while end > start and m[end - 1:end] in b" \t\r\n":
        end -= 1
    if m[start:start + 1] == b"[":
        if m[end - 1:end] != b"]":
            return None
        wrapper, open_at, close_at = b"[]", start, end - 1
    elif m[start:start + 1] == b"{":
        key = m.find(b'"traceEvents"')
        open_at = m.find(b"[", key) if key >= 0 else -1
        if key < 0 or open_at < 0 or m[key + 13:open_at].strip() != b":":
            return None
        closing = _array_close(m, open_at, end)
        if closing is None:
            return None
        wrapper, close_at = closing
    else:
        return None
    cuts, lo = [], open_at + 1
    while close_at - lo > PIECE_BYTES:
        found = BETWEEN_EVENTS.search(m, lo + PIECE_BYTES, close_at)
        if found is None:
            break
        cuts.append((lo, found.start() + 1))  # the piece ends with its last event's `}`
        lo = found.end() - 1  # the next begins with its first event's `{`
    cuts.append((lo, close_at))
    return wrapper, cuts


def _array_close(m: mmap.mmap, open_at: int, end: int, tries: int = 64) -> tuple[bytes, int] | None:
    """Where the events array closes: the last `]` after an event object (or the `[`) such that the document
    around the array is valid with the array emptied; the emptied document with it. Where a key after the
    array holds an array of objects (not seen in Kineto's traces), that array's `]` can be taken instead:
    the last piece then holds the keys between, does not decode, and the whole file is decoded."""
    close_at = end
    for _ in range(tries):
        close_at = m.rfind(b"]", open_at + 1, close_at)
        if close_at < 0:
            return None
        if m[max(open_at, close_at - 64):close_at].rstrip()[-1:] in (b"}", b"["):
            wrapper = bytes(m[:open_at]) + b"[]" + bytes(m[close_at + 1:])
            if refusal(wrapper) is None:
                return wrapper, close_at
    return None


def _pieces_refused(m: mmap.mmap, wrapper: bytes, cuts: list[tuple[int, int]]) -> str | None:
    """refusal() of the wrapper, then of each piece as an array of its own; the first refusal found. Each
    piece is copied between brackets into one buffer, reused (a fresh one per piece cost page faults: ~0.2 s
    per 210 MB)."""
    why = refusal(wrapper)
    buffer = bytearray(max((hi - lo for lo, hi in cuts), default=0) + 2)
    with memoryview(m) as source, memoryview(buffer) as target:
        for lo, hi in cuts:
            if why is not None:
                break
            n = hi - lo
            target[0:1], target[1:n + 1], target[n + 1:n + 2] = b"[", source[lo:hi], b"]"
            why = refusal(target[:n + 2])
    return why


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m explorer.ingest.chrome.json_check FILE", file=sys.stderr)
        return 2
    print(json.dumps({"refused": check_file(Path(argv[0]))}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
