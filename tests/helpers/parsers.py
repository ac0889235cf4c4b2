"""Which Chrome/Kineto parser path an ingest in a test takes: the msgspec path (small files), the compiled
reader (explorer.ingest.chrome.kscan, big files when installed) or DuckDB's reader (big files without it, and any
file the compiled reader refuses). `-pieces`: the events array cut wherever two events meet, read in parallel. DuckDB's path is also taken
as an install without any compiled helper takes it: text columns reordered by Arrow's take, not the gather
(explorer.ingest.chrome.gather), so the paths' equal tables check the gather too."""

from __future__ import annotations

from typing import Any

import pytest

from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome import gather, kscan

PATHS = ("msgspec", "native", "duckdb")
WITH_PIECES = (*PATHS, "native-pieces", "duckdb-pieces")


CHECK, PARSE_CHROME = chrome_fast._Check, chrome_fast.parse_chrome  # what strict use_parser puts back
LIBRARY = kscan._LIB  # the compiled reader as loaded
GATHER = gather._LIB


def use_parser(monkeypatch: pytest.MonkeyPatch, mode: str, strict: bool = False) -> None:
    """Route every Chrome/Kineto file of the test through `mode` (one of WITH_PIECES). `strict`: a file may
    not leave it (the compiled reader refusing it, or a fast path handing it to msgspec fails the test)."""
    assert mode in WITH_PIECES, mode

    def no_fallback(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError(f"the file left the {mode} path")

    monkeypatch.setattr(chrome_fast, "parse_chrome", no_fallback if strict and mode != "msgspec" else PARSE_CHROME)
    monkeypatch.setattr(chrome_fast, "_Check", no_fallback if strict and mode.startswith("native") else CHECK)
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 1 << 40 if mode == "msgspec" else 0)
    if mode.startswith("native"):
        assert LIBRARY is not None, f"{kscan.LIBRARY} is not built (the install builds it: hatch_build.py)"
    # DuckDB's path: as an install without the library reads (a test may take several paths in turn)
    monkeypatch.setattr(kscan, "_LIB", None if mode.startswith("duckdb") else LIBRARY)
    monkeypatch.setattr(gather, "_LIB", None if mode.startswith("duckdb") else GATHER)
    if mode == "native-pieces":
        monkeypatch.setattr(chrome_fast, "NATIVE_PIECE_BYTES", 1)
    if mode == "duckdb-pieces":
        monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", 1)
