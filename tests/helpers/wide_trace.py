"""A Kineto trace wider than one table page: WIDE_OPS distinct ops, each launching its own kernel, with
1–4 calls each (ties in Calls, broken by name), durations that end in .x25/.x75 µs (ties of the
1-decimal display) and one hostile op name. `expected_*` compute the tables' numbers from the raw JSON
with decimal arithmetic, independently of the parser."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

WIDE_OPS = 620  # > 3 pages of 200 rows
HOSTILE_OP = "<script>alert('op')</script>"


def op_name(i: int) -> str:
    return HOSTILE_OP if i == 7 else f"aten::wide_{i:04d}"


def kernel_name(i: int) -> str:
    return f"wide_kernel_{(i * 37) % WIDE_OPS:04d}"


def wide_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]
    host = Decimal(10)
    corr = 0
    for i in range(WIDE_OPS):
        for _ in range(1 + (i * 7) % 4):
            corr += 1
            dur = Decimal(3 + (i * 13) % 50) + Decimal((250, 750, 100, 0)[i % 4]) / 1000
            kdur = Decimal(1 + (i * 29) % 40) + Decimal((750, 250, 0, 500)[i % 4]) / 1000
            events.append({"ph": "X", "cat": "cpu_op", "name": op_name(i), "pid": 1, "tid": 1, "ts": host,
                           "dur": dur, "args": {"External id": corr}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": host + 1, "dur": 1, "args": {"External id": corr, "correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": kernel_name(i), "pid": 0, "tid": 7,
                           "ts": host + 2, "dur": kdur,
                           "args": {"External id": corr, "device": 0, "stream": 7, "correlation": corr,
                                    "grid": [i + 1, 1, 1], "block": [128, 1, 1]}})
            host += dur + 60
    return events


def write_wide_trace(path: Path) -> Path:
    """ts and dur are written as JSON numbers; each has few digits, so its text is the decimal it was made from."""
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": wide_events()},
                               default=lambda d: float(d) if d % 1 else int(d)))
    return path


def raw_events(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(), parse_float=Decimal)["traceEvents"])


def expected_op_calls(path: Path) -> dict[str, int]:
    calls: dict[str, int] = defaultdict(int)
    for e in raw_events(path):
        if e.get("cat") == "cpu_op":
            calls[e["name"]] += 1
    return dict(calls)


def expected_kernel_total_ns(path: Path) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for e in raw_events(path):
        if e.get("cat") == "kernel":
            total[e["name"]] += int(Decimal(e["dur"]) * 1000)
    return dict(total)
