"""Constructed Kineto traces for the advisor's rule tests: one host thread issuing ops, each op's kernel on one
stream, linked by correlation and ac2g flows; times in whole µs so a test recomputes every number exactly."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Op:
    name: str
    dur: int  # µs on the host
    shapes: list[list[int]] = field(default_factory=list)
    kernel: int | None = None  # µs on the device (None: no kernel)
    launch: int = 2  # µs of the launch call
    kernel_name: str = ""
    gap_before: int = 0  # µs the host spends in `busy_name` before the op
    busy_name: str = "preprocess"
    sync: int = 0  # µs of a cudaStreamSynchronize after the op
    types: list[str] = field(default_factory=list)  # Kineto's Input type
    kargs: dict[str, Any] = field(default_factory=dict)  # extra args of the kernel (launch parameters)
    concrete: list[str] = field(default_factory=list)  # Kineto's Concrete Inputs (scalar arguments as text)
    kernel_cat: str = "kernel"  # gpu_memcpy for a copy
    launch_name: str = "cudaLaunchKernel"  # cudaMemcpyAsync for a copy
    inner_sync: int = 0  # µs of a cudaStreamSynchronize inside the op, right after the launch


@dataclass
class Trace:
    events: list[dict[str, Any]] = field(default_factory=list)
    host: int = 0
    gpu: int = 0
    corr: int = 0

    def add(self, op: Op) -> None:
        if op.gap_before:
            self.events.append(_x("user_annotation", op.busy_name, 1, self.host, op.gap_before))
            self.host += op.gap_before
        self.corr += 1
        args = {"Input Dims": op.shapes, "Input type": op.types, "External id": self.corr}
        self.events.append(_x("cpu_op", op.name, 1, self.host, op.dur,
                              {**args, "Concrete Inputs": op.concrete} if op.concrete else args))
        if op.kernel is not None:
            t = self.host + 1
            self.events.append(_x("cuda_runtime", op.launch_name, 1, t, op.launch, {"correlation": self.corr}))
            self.gpu = max(self.gpu, t + op.launch)
            self.events.append({**_x(op.kernel_cat, op.kernel_name or f"{op.name}_kernel", 7, self.gpu, op.kernel,
                                     {"correlation": self.corr, "device": 0, "stream": 7, **op.kargs}), "pid": 0})
            if op.inner_sync:
                self.events.append(_x("cuda_runtime", "cudaStreamSynchronize", 1, t + op.launch, op.inner_sync))
            self.events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": self.corr, "pid": 1, "tid": 1, "ts": t})
            self.events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": self.corr, "pid": 0, "tid": 7,
                                "ts": self.gpu, "bp": "e"})
            self.gpu += op.kernel
        self.host += op.dur
        if op.sync:
            self.events.append({**_x("cuda_sync", "cudaStreamSynchronize", 1, self.host, op.sync), "cat": "cuda_sync"})
            self.host += op.sync

    def write(self, path: Path, device: str = "Test GPU", sms: int | None = None) -> Path:
        props: dict[str, Any] = {"id": 0, "name": device, **({"numSms": sms} if sms is not None else {})}
        doc = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000,
               "deviceProperties": [props], "traceEvents": self.events}
        path.write_text(json.dumps(doc))
        return path


def _x(cat: str, name: str, tid: int, ts: int, dur: int, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args or {}}


def build(ops: list[Op], path: Path, device: str = "Test GPU", sms: int | None = None) -> Path:
    t = Trace()
    for op in ops:
        t.add(op)
    return t.write(path, device, sms)


def rmsnorm_ops(kernel: int | None, rows: int = 64, hidden: int = 2048) -> list[Op]:
    """The six ops of a hand-written RMSNorm, each `kernel` µs on the device (CPU-only when None)."""
    x, r = [rows, hidden], [rows, 1]
    return [Op("aten::mul", 10, [x, x], kernel), Op("aten::mean", 10, [x, []], kernel),
            Op("aten::add", 10, [r, []], kernel), Op("aten::rsqrt", 10, [r], kernel),
            Op("aten::mul", 10, [x, r], kernel), Op("aten::mul", 10, [x, [hidden]], kernel)]
