"""Bounded answers for agents: every list of rows cut to the asked number of rows, every text to MAX_TEXT characters, the
whole answer to the asked number of characters, with a "truncated, N more — narrow with …" line for each cut; every
integer `*_ns` duration or relative time gains a `*_human` twin. Pure functions over JSON-shaped values; no I/O."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field

from explorer.cli import fmt_ns

DEFAULT_ROWS = 20
MAX_ROWS = 200
DEFAULT_CHARS = 20_000
MIN_CHARS = 2_000
MAX_CHARS = 100_000
MAX_TEXT = 400  # one name or arg value: a 10 kB templated kernel name is cut, and the cut said
SCALARS = 16  # a list of plain values (not rows) keeps at least this many
CLOCK_NS = 10**15  # 11.6 days: a larger `*_ns` is a clock reading (an absolute time), whose human string says nothing

Rows = Annotated[int, Field(ge=1, le=MAX_ROWS, description=f"at most this many rows in any list of the answer "
                            f"(default {DEFAULT_ROWS}, max {MAX_ROWS})")]
Chars = Annotated[int, Field(ge=MIN_CHARS, le=MAX_CHARS, description="at most this many characters of JSON in the "
                             f"answer (default {DEFAULT_CHARS}, max {MAX_CHARS})")]


def dumps(value: Any) -> str:
    """The answer's text as the client receives it: JSON, non-ASCII kept (names are text, never markup)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def human_ns(ns: int) -> str:
    return fmt_ns(ns)


class _Cut:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.lists: list[tuple[str, int, int]] = []  # path, shown, total
        self.texts = 0

    def value(self, value: Any, path: str) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                out[key] = self.value(item, f"{path}.{key}" if path else str(key))
                if key.endswith("_ns") and isinstance(item, int) and not isinstance(item, bool) and \
                        abs(item) < CLOCK_NS:
                    out[key[:-3] + "_human"] = human_ns(item)
            return out
        if isinstance(value, list):
            # rows (records) are cut at the cap; a list of plain values (a grid's dims, ranks) only past SCALARS
            cap = self.cap if any(isinstance(v, dict | list) for v in value) else max(self.cap, SCALARS)
            if len(value) > cap:
                self.lists.append((path, cap, len(value)))
            return [self.value(v, path) for v in value[:cap]]
        if isinstance(value, str) and len(value) > MAX_TEXT:
            self.texts += 1
            return value[:MAX_TEXT] + f"… [{len(value) - MAX_TEXT:,} more characters]"
        return value

    def notes(self, narrow: str, given: list[str]) -> list[str]:
        lines = [f"truncated, {total - shown:,} more in {path or 'the answer'} ({shown:,} of {total:,} shown) — "
                 f"narrow with {narrow}, or raise limit" for path, shown, total in self.lists]
        if self.texts:
            lines.append(f"truncated, {self.texts:,} texts cut at {MAX_TEXT} characters")
        return given + lines


def bounded(answer: dict[str, Any], rows: int, max_chars: int, narrow: str) -> dict[str, Any]:
    """`answer` within `rows` per list and `max_chars` characters of JSON: lists shortened further (halved) until
    the text fits; `truncated` lists every cut (notes already in answer["truncated"] kept first)."""
    given = [str(n) for n in answer.get("truncated", [])]
    body = {k: v for k, v in answer.items() if k != "truncated"}
    cap = rows
    while True:
        cut = _Cut(cap)
        out: dict[str, Any] = cut.value(body, "")
        out["truncated"] = cut.notes(narrow, given)
        if len(dumps(out)) <= max_chars:
            return out
        if cap == 0:
            break
        cap //= 2
    total = len(dumps(out))
    return {"truncated": [f"truncated, the answer is {total:,} characters even with no rows (max_chars={max_chars:,})"
                          f" — narrow with {narrow}, or raise max_chars"]}
