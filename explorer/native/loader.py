"""The compiled helpers: C files beside the modules that use them (explorer/ingest/chrome/_kscan.c, the events
reader; explorer/ingest/chrome/_gather.c, text columns reordered; explorer/analysis/_nest.c, nesting's stack pass),
built at install by hatch_build.py and loaded here through ctypes (plain C: no Python headers, and ctypes drops
the GIL around every call). A library that is absent (an install without a C compiler) or built from another
version of its C file is not used: its caller keeps its Python, Arrow or DuckDB way."""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

log = logging.getLogger(__name__)

# the libraries' names: `_kscan.so.1` beside `_kscan.c` (hatch_build.LIBRARY_SUFFIX); not `.so`, which the import
# system would take for a Python extension module
LIBRARY_SUFFIX = ".so.1"


def beside(module_file: str, stem: str) -> Path:
    """Where the library built from `stem`.c, next to that module, is."""
    return Path(module_file).with_name(stem + LIBRARY_SUFFIX)


def load(path: Path, abi_symbol: str, abi: int) -> ctypes.CDLL | None:
    """The library at `path` if it loads and its `abi_symbol()` answers `abi` (the interface version its
    Python side was written for), else None (said in the log when the file is there)."""
    if not path.is_file():
        return None
    try:
        lib = ctypes.CDLL(str(path))
        version = getattr(lib, abi_symbol)
    except (OSError, AttributeError) as exc:
        log.warning("%s did not load (%s): not used", path, exc)
        return None
    version.restype = ctypes.c_int64
    if version() != abi:
        log.warning("%s is a build of another version (interface %d, not %d): not used; `make install` or "
                    "`python hatch_build.py` builds it again", path, version(), abi)
        return None
    return lib
