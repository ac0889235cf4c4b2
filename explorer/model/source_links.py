"""Source links for Python frames: where a `with_stack` frame or an op's call stack points (file, line), and
the VS Code URL that opens it, on this machine (`vscode://file/PATH:LINE`) or over Remote-SSH
(`vscode://vscode-remote/ssh-remote+HOST/PATH:LINE`). The link rules come from settings (source host, path
maps, a root for relative paths); which slice's frame a link shows is decided by its callers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from explorer.config import Settings, parse_source_map

# torch.profiler names a Python frame event `path/to/file.py(123): function` (the function's first line);
# Kineto's older `Call stack` arg joins such frames, innermost first, with ";".
FRAME = re.compile(r"^(?P<path>[^();<>\n]+?\.py)\((?P<line>\d+)\): (?P<function>.+)$")
CALL_STACK_ARGS = ("Call stack", "call_stack", "stack")


@dataclass(frozen=True)
class SourceRef:
    path: str
    line: int
    function: str


def parse_frame(text: str) -> SourceRef | None:
    """`file.py(12): f` -> SourceRef("file.py", 12, "f"); None for anything else (built-ins, ATen ops)."""
    m = FRAME.match(text.strip())
    if m is None or int(m["line"]) < 1:
        return None
    return SourceRef(m["path"], int(m["line"]), m["function"])


def parse_call_stack(args: dict[str, Any]) -> SourceRef | None:
    """The innermost frame of an op's recorded call stack (with_stack traces that carry one in args)."""
    for key in CALL_STACK_ARGS:
        stack = args.get(key)
        frames = stack.split(";") if isinstance(stack, str) else stack if isinstance(stack, list) else []
        for frame in frames:
            ref = parse_frame(str(frame))
            if ref is not None:
                return ref
    return None


@dataclass(frozen=True)
class SourceLinker:
    """Builds `vscode://` URLs for source refs. `host`: the ssh host the paths live on (Remote-SSH), "" for
    local files; `source_map`: prefix rewrites, the longest matching FROM first; `root`: the folder relative
    frame paths are joined to (torch writes paths relative to the sys.path entry); without one they get none."""

    host: str = ""
    source_map: tuple[tuple[str, str], ...] = ()
    root: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> SourceLinker:
        """Settings have been validated (explorer.config): the host is a plain name, the map parses."""
        return cls(settings.source_host, parse_source_map(settings.source_map), settings.source_root)

    def local_path(self, path: str) -> str | None:
        """The path on the machine VS Code opens, after the maps and the root; None when it stays relative."""
        for src, dst in sorted(self.source_map, key=lambda p: -len(p[0])):
            if path == src or path.startswith(src.rstrip("/") + "/"):
                path = dst + path[len(src.rstrip("/")):]
                break
        if not path.startswith("/"):
            if not self.root:
                return None
            path = str(PurePosixPath(self.root) / path)
        return path

    def url(self, ref: SourceRef | None) -> str | None:
        if ref is None:
            return None
        path = self.local_path(ref.path)
        if path is None:
            return None
        where = f"{quote(path, safe='/._-~+@')}:{ref.line}"
        if self.host:
            return f"vscode://vscode-remote/ssh-remote+{quote(self.host, safe='@._-')}{where}"
        return f"vscode://file{where}"

    def for_event(self, name: str, args: Any, parent_names: list[str]) -> str | None:
        """The link of one slice: its own frame (a Python frame event), else its recorded call stack, else
        the innermost enclosing Python frame (the op's with_stack call stack)."""
        ref = parse_frame(name)
        if ref is None and isinstance(args, str):
            try:
                args = json.loads(args) if args else {}
            except ValueError:
                args = {}
        if ref is None and isinstance(args, dict):
            ref = parse_call_stack(args)
        for parent in parent_names:
            if ref is not None:
                break
            ref = parse_frame(parent)
        return self.url(ref)
