"""The per-rank truth, computed straight from the raw per-rank trace JSON with Decimal arithmetic (no
explorer code): steps, window, interval unions of communication and compute, arrivals at collectives."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

COLLECTIVE = re.compile(r"nccl|(?:^|[^a-z])(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all)"
                        r"(?:[^a-z]|$)", re.IGNORECASE)
HOST_OP_CATS = ("cpu_op", "user_annotation")


def ns(value: Any) -> int:
    return int(Decimal(str(value)) * 1000)


def events(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text(), parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def union(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    total, cur_a, cur_b = 0, None, None
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in intervals):
        if b <= a:
            continue
        if cur_b is None or a > cur_b:
            total += (cur_b - cur_a) if cur_b is not None and cur_a is not None else 0
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    return total + ((cur_b - cur_a) if cur_b is not None and cur_a is not None else 0)


def rank_truth(path: Path, device: bool) -> dict[str, Any]:
    """Steps, window and parts of one rank's file: device mode reads `kernel` events, host mode cpu ops and
    user annotations (ProfilerStep#N excluded); a collective by name is communication. The window is the
    rank's steps (each one; they do not overlap): every number is the sum over its steps."""
    evs = events(path)
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]) for e in evs
                   if e["name"].startswith("ProfilerStep#"))
    assert all(a[1] <= b[0] for a, b in zip(steps, steps[1:], strict=False))  # the sum below needs disjoint steps

    def in_steps(intervals: list[tuple[int, int]]) -> int:
        return sum(union(intervals, lo, hi) for lo, hi, _ in steps)
    cats = ("kernel",) if device else HOST_OP_CATS
    work = [e for e in evs if e.get("cat") in cats and not e["name"].startswith("ProfilerStep#")]
    comm = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in work if COLLECTIVE.search(e["name"])]
    compute = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in work if not COLLECTIVE.search(e["name"])]
    durs = sorted(b - a for a, b, _ in steps)
    arrivals: dict[str, list[int]] = {}
    for e in sorted(work, key=lambda e: ns(e["ts"])):  # host mode: the calling thread's ops (cpu_op) only
        if COLLECTIVE.search(e["name"]) and (device or e["cat"] == "cpu_op"):
            arrivals.setdefault(e["name"], []).append(ns(e["ts"]))
    return {"steps": [(n, b - a) for a, b, n in steps], "step_time_ns": durs[(len(durs) - 1) // 2],
            "window_ns": sum(b - a for a, b, _ in steps), "comm_ns": in_steps(comm), "compute_ns": in_steps(compute),
            "busy_ns": in_steps(comm + compute), "arrivals": arrivals,
            "totals": _totals(evs)}


def _totals(evs: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in evs:
        out[e["name"]] = out.get(e["name"], 0) + ns(e["dur"])
    return out


def lateness(truths: list[dict[str, Any]], name: str) -> list[int]:
    """Per rank, the lower median over occurrences of (its start - the lower median start over ranks)."""
    per = [t["arrivals"][name] for t in truths]
    n = len(per)
    late: list[list[int]] = [[] for _ in range(n)]
    for k in range(len(per[0])):
        starts = sorted(p[k] for p in per)
        median = starts[(n - 1) // 2]
        for r in range(n):
            late[r].append(per[r][k] - median)
    return [sorted(v)[(len(v) - 1) // 2] for v in late]
