"""CUDA caching-allocator snapshots (`torch.cuda.memory._snapshot()`, `_dump_snapshot`'s pickle or its JSON form)
read into two tables: the trace of allocator actions and the blocks of the segments at the snapshot. The pickle is
read by an unpickler that admits no class and no function: only the builtin values the format uses (dict, list,
str, int, float, bool, None, tuple, bytes), so a snapshot can never run code. Fields as torch/cuda/memory.py
`_snapshot` documents them and torch/cuda/_memory_viz.py reads them."""

from __future__ import annotations

import io
import json
import pickle
from typing import Any

import pyarrow as pa

from explorer.errors import BadTrace, UnsafePickle
from explorer.ingest.builder import TraceBuilder
from explorer.model.tables import ALLOC_BLOCKS, ALLOC_TRACE

MAX_FRAMES = 16  # frames kept per action / block (user frames, innermost first), as JSON text
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot")
# frames _memory_viz._frame_filter leaves out: the unwinder's and the interpreter's own, not the user's code
OMIT_FUNCTIONS = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
                  "PyEval_", "PyObject_", "PyFunction_")
OMIT_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
              "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h")


class _Refused(Exception):
    pass


class _BuiltinsOnly(pickle.Unpickler):
    """Every opcode that would name a global (a class or a function: what `__reduce__` payloads need) is refused;
    the builtin containers and scalars have opcodes of their own and never ask for one."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("a persistent id")


def load_snapshot(data: bytes, name: str) -> dict[str, Any]:
    """The snapshot dict; UnsafePickle when the pickle asks for any class or function, BadTrace when it is not
    a snapshot (or not readable)."""
    if data[:1] == b"\x80":
        try:
            value = _BuiltinsOnly(io.BytesIO(data)).load()
        except _Refused as exc:
            raise UnsafePickle(name, f"the pickle asks to load {exc} (a snapshot holds only builtin values): "
                                     "refused, nothing of it was run") from None
        except Exception as exc:  # (any malformed pickle: UnpicklingError, EOFError, ValueError, ...)
            raise BadTrace(name, f"not a readable allocator snapshot pickle ({type(exc).__name__})") from None
    else:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            raise BadTrace(name, "not a readable allocator snapshot (invalid JSON)") from None
    if not isinstance(value, dict) or not isinstance(value.get("segments"), list):
        raise BadTrace(name, "not an allocator snapshot: no 'segments' list (torch.cuda.memory._snapshot())")
    return value


def parse_alloc_snapshot(data: bytes, name: str, builder: TraceBuilder, instance: str = "") -> dict[str, Any]:
    """A snapshot file into the run: its two tables join those of the run's other snapshots (TraceBuilder.finish)."""
    trace, blocks = snapshot_tables(load_snapshot(data, name))
    builder.add_table("alloc_trace", trace)
    builder.add_table("alloc_blocks", blocks)
    return {"actions": trace.num_rows, "blocks": blocks.num_rows}


def snapshot_tables(snap: dict[str, Any]) -> tuple[pa.Table, pa.Table]:
    """(alloc_trace, alloc_blocks): every trace entry of every device in order, and every block of every segment."""
    trace: dict[str, list[Any]] = {f.name: [] for f in ALLOC_TRACE}
    traces = snap.get("device_traces")
    for device, entries in enumerate(traces if isinstance(traces, list) else []):
        for seq, e in enumerate(entries if isinstance(entries, list) else []):
            if not isinstance(e, dict) or e.get("action") not in ACTIONS:
                continue
            frame, frames = _frames(e.get("frames"))
            row = (device, seq, _int(e.get("time_us"), -1), e["action"], _int(e.get("addr")), _int(e.get("size")),
                   _int(e.get("stream")), _int(e.get("device_free"), -1), frame, frames)
            for key, value in zip(trace, row, strict=True):
                trace[key].append(value)
    blocks: dict[str, list[Any]] = {f.name: [] for f in ALLOC_BLOCKS}
    for k, seg in enumerate(s for s in snap["segments"] if isinstance(s, dict)):
        offset = 0
        seg_blocks = seg.get("blocks")
        for b in seg_blocks if isinstance(seg_blocks, list) else []:
            if not isinstance(b, dict):
                continue
            size = _int(b.get("size"))
            frame, _ = _frames(b.get("frames"))
            block_row = (_int(seg.get("device")), k, _int(seg.get("address")), _int(seg.get("total_size")),
                   str(seg.get("segment_type", "")), _int(seg.get("stream")), offset, size,
                   _int(b.get("requested_size"), size), str(b.get("state", "")), frame)
            for key, value in zip(blocks, block_row, strict=True):
                blocks[key].append(value)
            offset += size
    return pa.table(trace, schema=ALLOC_TRACE), pa.table(blocks, schema=ALLOC_BLOCKS)


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return default


def _frames(frames: object) -> tuple[str, str]:
    """(the innermost frame as "file:line:name", up to MAX_FRAMES frames innermost first, as JSON text): Python
    frames when there are any (with stacks="all" the innermost are the allocator's own C++), else the others."""
    if not isinstance(frames, list):
        return "", "[]"
    kept: list[str] = []
    python: list[str] = []
    for f in frames:
        if not isinstance(f, dict):
            continue
        name, filename = str(f.get("name", "")), str(f.get("filename", ""))
        if any(o in name for o in OMIT_FUNCTIONS) or any(o in filename for o in OMIT_FILES):
            continue
        text = f"{filename.rsplit('/', 1)[-1]}:{_int(f.get('line'))}:{name}"
        (python if filename.endswith(".py") else kept).append(text)
    chosen = (python or kept)[:MAX_FRAMES]
    return (chosen[0] if chosen else ""), json.dumps(chosen)
