"""A tiny model profiled with `torch.profiler(with_stack=True)` by the source-link and export tests: the
frames of `rms_step` and `rms_norm` below are what their links must point at (file and line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def rms_norm(torch: Any, x: Any, w: Any) -> Any:
    variance = (x * x).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + 1e-6) * w


def rms_step(torch: Any, x: Any, w: Any) -> Any:
    y = rms_norm(torch, x, w)
    return torch.relu(y)


def profile_with_stack(out: Path, steps: int = 3) -> Path:
    """Profile rms_step on the CPU with call stacks and write the Kineto trace to `out`."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    x, w = torch.randn(8, 64), torch.randn(64)
    rms_step(torch, x, w)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True) as prof:
        for _ in range(steps):
            rms_step(torch, x, w)
    prof.export_chrome_trace(str(out))
    return out
