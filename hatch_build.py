"""Build hook: compiles the C helpers (SOURCES: the events reader, the text gather, nesting's stack pass) into
shared libraries beside them (explorer.native.loader loads them).

hatchling runs this for a wheel and for an editable install (`make install`); `python hatch_build.py` compiles
them alone (the Makefile does, when a C file changes). The libraries are plain C loaded through ctypes (no
Python headers). Without a C compiler the install still succeeds and prints why: big Chrome/Kineto files are
then read by DuckDB's reader (explorer.ingest.chrome.kscan.available() is False) and slices nested in numpy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
SOURCES = ("explorer/ingest/chrome/_kscan.c", "explorer/ingest/chrome/_gather.c", "explorer/analysis/_nest.c")
LIBRARY_SUFFIX = ".so.1"  # explorer.native.loader.LIBRARY_SUFFIX
FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]


def compile_library(source: Path, target: Path) -> str | None:
    """Compile `source` to `target` (written whole or not at all); None, or why it could not."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler (cc or gcc) on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / target.name
        try:
            done = subprocess.run([compiler, *FLAGS, "-o", str(built), str(source)], capture_output=True, text=True)
        except OSError as exc:
            return f"{compiler} did not run: {exc}"
        if done.returncode != 0:
            return f"{compiler} failed: {done.stderr.strip()[-2000:]}"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(built, partial)
        partial.replace(target)
    return None


def library_of(source: str) -> str:
    """`x/_kscan.c` -> `x/_kscan.so.1`: a shared library's versioned name, which the import system does not
    take for an extension module (`_kscan.so` it would: pkgutil.walk_packages tried to import it)."""
    return source[:-2] + LIBRARY_SUFFIX


NOT_BUILT = ("trace-explorer: the compiled helpers are not built ({}); big Chrome/Kineto files will be read by "
             "DuckDB's reader and slices nested in Python")


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, outside a build
    BuildHookInterface = object  # type: ignore[assignment,misc]


class NativeBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Editable install: each library goes beside its source (the checkout is what gets imported). Wheel:
    they are built apart and placed in the wheel, which then carries the platform's tag."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        for source in SOURCES:
            if version == "editable":
                why = compile_library(ROOT / source, ROOT / library_of(source))
            else:
                target = Path(self.directory) / "native-build" / library_of(source)
                why = compile_library(ROOT / source, target)
                if why is None:
                    build_data["force_include"][str(target)] = library_of(source)
                    build_data["pure_python"] = False
                    build_data["infer_tag"] = True
            if why is not None:
                print(NOT_BUILT.format(why), file=sys.stderr)
                return


if __name__ == "__main__":  # as the install does: a missing compiler is said, not an error
    for source in SOURCES:
        problem = compile_library(ROOT / source, ROOT / library_of(source))
        print(f"built {library_of(source)}" if problem is None else NOT_BUILT.format(problem))
        if problem:
            break
