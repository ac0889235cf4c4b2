"""Small Kineto-shaped traces for the span, device busy and gap rules (issue 34 points 3, 4, 8), and an
independent reading of them: plain json + decimal, without importing explorer.

- markers_trace: Kineto's bookkeeping (the "PyTorch Profiler (0)" span of cat Trace, "Iteration Start",
  "Record Window End") 3 ms before and 9.45 ms after the real events.
- overlap_trace: no process/thread metadata; kernels overlapping on one stream (pid 0 = device, tid 7 = stream).
- graph_trace: host calls cudaGraphLaunch with no kernels of theirs recorded (and one short memcpy), or with
  their kernels (`kernels=True`).
- short_gap_trace: two kernels 1 ns apart and a 9.999 us gap.
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

# the profiler bookkeeping, as libkineto's output_json.cpp writes it (read independently of explorer's table)
MARKER_INSTANTS = ("Record Window End", "Record Window Start")
MARKER_INSTANT_PREFIX = "Iteration Start: "
FLOW_PHASES = {"s", "t", "f"}
# device executions: kernels, copies and sets (Kineto's names, its 2021 ones, MTIA's)
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "mtia_ccp_events"}


def ns(us: Any) -> int:
    """A trace time (us, 3 decimals) in ns, rounded half up like the parser's exact decimal reading."""
    return int((Decimal(str(us)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def is_marker(e: dict[str, Any]) -> bool:
    name = str(e.get("name", ""))
    if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "trace":
        return True
    return e.get("ph") in ("i", "I") and (name in MARKER_INSTANTS or name.startswith(MARKER_INSTANT_PREFIX))


def real_bounds(events: list[dict[str, Any]]) -> tuple[int, int]:
    """(first start, last end) in ns of the events that are not metadata, flows or profiler markers."""
    lo: int | None = None
    hi: int | None = None
    for e in events:
        if not isinstance(e, dict) or e.get("ph") in FLOW_PHASES | {"M"} or "ts" not in e or is_marker(e):
            continue
        start = ns(e["ts"])
        end = start + (ns(e["dur"]) if e.get("ph") == "X" and e.get("dur") is not None else 0)
        lo = start if lo is None else min(lo, start)
        hi = end if hi is None else max(hi, end)
    assert lo is not None and hi is not None
    return lo, hi


def all_bounds(events: list[dict[str, Any]]) -> tuple[int, int]:
    """(first start, last end) in ns of every timed event but metadata and flows, markers included."""
    times = [(ns(e["ts"]), ns(e["ts"]) + (ns(e["dur"]) if e.get("ph") == "X" and e.get("dur") is not None else 0))
             for e in events if isinstance(e, dict) and e.get("ph") not in FLOW_PHASES | {"M"} and "ts" in e]
    return min(t[0] for t in times), max(t[1] for t in times)


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total, cur = 0, None
    for a, b in sorted(intervals):
        if cur is None or a > cur[1]:
            total += cur[1] - cur[0] if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur else 0)


def device_intervals(events: list[dict[str, Any]]) -> dict[Any, list[tuple[int, int]]]:
    """Kernel / memcpy / memset intervals per device (Kineto: pid = device index)."""
    out: dict[Any, list[tuple[int, int]]] = {}
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in DEVICE_CATS:
            out.setdefault(e["pid"], []).append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    return out


def gaps_ns(intervals: list[tuple[int, int]]) -> list[int]:
    """The gaps between the union's segments of one device."""
    merged: list[list[int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [merged[i + 1][0] - merged[i][1] for i in range(len(merged) - 1)]


def pct_text(part: int, whole: int) -> str:
    """The page's one-decimal percentage, from decimals."""
    return f"{(Decimal(part) * 100 / Decimal(whole)).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)} %"


def dumps(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
                       "traceEvents": events}).encode()


def _meta() -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
    ]


def _launch(events: list[dict[str, Any]], corr: int, host: str, dev: str | None, cat: str, dur_us: str,
            name: str = "cudaLaunchKernel", kernel: str = "gemm_kernel") -> None:
    """A cpu_op, its runtime call at `host` and (when `dev`) its device execution linked by ac2g."""
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": host, "dur": "8.000",
                   "args": {"External id": corr}})
    events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": host, "dur": "5.000",
                   "args": {"External id": corr, "correlation": corr}})
    if dev is None:
        return
    events.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": 7, "ts": dev, "dur": dur_us,
                   "args": {"External id": corr, "correlation": corr, "device": 0, "stream": 7}})
    events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": host})
    events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": dev, "bp": "e"})


def markers_trace() -> list[dict[str, Any]]:
    """Real events from 4000.000 to 14050.125 us; the profiler's span from 1000.000, its end mark at 23500.000."""
    events = _meta() + [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": "1000.000", "dur": "20000.000", "args": {"Op count": 0}},
        {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",
         "tid": "Trace PyTorch Profiler", "ts": "1000.000"},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": "4000.000",
         "dur": "10000.000", "args": {}},
    ]
    for i, (host, dev, dur) in enumerate([("4010.000", "4100.500", "3000.250"), ("7000.000", "7200.000", "4000.000"),
                                          ("11000.000", "11200.000", "2850.125")]):
        _launch(events, i + 1, host, dev, "kernel", dur)
    events.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": "23500.000"})
    return events


def overlap_trace() -> list[dict[str, Any]]:
    """No M events; kernels on pid 0 / tid 7: [1000, 1300] and [1100, 1500] overlap, then [2000, 2100]."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "cpu_op", "name": "forward", "pid": 1234, "tid": 1234, "ts": "900.000",
         "dur": "1300.000", "args": {}},
    ]
    for i, (start, dur) in enumerate([("1000.000", "300.000"), ("1100.000", "400.000"), ("2000.000", "100.000")]):
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{i}", "pid": 0, "tid": 7, "ts": start,
                       "dur": dur, "args": {"device": 0, "stream": 7, "correlation": i + 1}})
    return events


GRAPH_LAUNCHES = 40


def graph_trace(kernels: bool = False) -> list[dict[str, Any]]:
    """GRAPH_LAUNCHES cudaGraphLaunch calls 100 us apart; without `kernels` none of theirs is recorded, only one
    2 us memcpy (busy 0.05 %); with `kernels` each has a 60 us kernel sharing its correlation id."""
    events = _meta()
    _launch(events, 1000, "5.000", "20.000", "gpu_memcpy", "2.000", "cudaMemcpyAsync", "Memcpy HtoD (Pinned -> Device)")
    for i in range(GRAPH_LAUNCHES):
        host = f"{100 + i * 100}.000"
        _launch(events, i + 1, host, f"{110 + i * 100}.000" if kernels else None, "kernel", "60.000",
                "cudaGraphLaunch", "graph_kernel")
    return events


def short_gap_trace() -> list[dict[str, Any]]:
    """Kernels [1000.000, 1010.000], [1010.001, 1020.001], [1030.000, 1035.000]: gaps of 1 ns and 9.999 us."""
    events = _meta()
    for i, (host, dev, dur) in enumerate([("970.000", "1000.000", "10.000"), ("980.000", "1010.001", "10.000"),
                                          ("990.000", "1030.000", "5.000")]):
        _launch(events, i + 1, host, dev, "kernel", dur)
    return events
