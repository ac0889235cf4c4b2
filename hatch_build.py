"""Build hook: compiles the events reader (explorer/ingest/_kscan.c) into a shared library beside it.

hatchling runs this for a wheel and for an editable install (`make install`); `python hatch_build.py` compiles
it alone (the Makefile does, when the C file changes). The library is plain C loaded through ctypes (no
Python headers). Without a C compiler the install still succeeds, prints why, and big Chrome/Kineto files
are read by DuckDB's reader as before (explorer.ingest.kscan.available() is False).
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
SOURCE = ROOT / "explorer" / "ingest" / "_kscan.c"
LIBRARY = SOURCE.with_name("_kscan.so")
IN_WHEEL = "explorer/ingest/_kscan.so"
FLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]


def compile_library(target: Path) -> str | None:
    """Compile SOURCE to `target` (written whole or not at all); None, or why it could not."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler (cc or gcc) on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / target.name
        try:
            done = subprocess.run([compiler, *FLAGS, "-o", str(built), str(SOURCE)], capture_output=True, text=True)
        except OSError as exc:
            return f"{compiler} did not run: {exc}"
        if done.returncode != 0:
            return f"{compiler} failed: {done.stderr.strip()[-2000:]}"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(built, partial)
        partial.replace(target)
    return None


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, outside a build
    BuildHookInterface = object  # type: ignore[assignment,misc]


class KscanBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Editable install: the library goes beside its source (the checkout is what gets imported). Wheel:
    it is built apart and placed in the wheel, which then carries the platform's tag."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            why = compile_library(LIBRARY)
        else:
            target = Path(self.directory) / "kscan-build" / LIBRARY.name
            why = compile_library(target)
            if why is None:
                build_data["force_include"][str(target)] = IN_WHEEL
                build_data["pure_python"] = False
                build_data["infer_tag"] = True
        if why is not None:
            print(f"trace-explorer: the compiled events reader is not built ({why}); "
                  "big Chrome/Kineto files will be read by DuckDB's reader", file=sys.stderr)


if __name__ == "__main__":  # as the install does: a missing compiler is said, not an error
    problem = compile_library(LIBRARY)
    print(f"built {LIBRARY.relative_to(ROOT)}" if problem is None else
          f"trace-explorer: the compiled events reader is not built ({problem}); big Chrome/Kineto files "
          "will be read by DuckDB's reader")
