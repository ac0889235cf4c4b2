"""Real before/after pairs for the advisor's predictions, captured with torch.profiler on the CPU in a process of
their own, one pair per process (tests/analysis/advice/test_engine_predictions.py runs it): `python
advice_pairs.py OUT_DIR NAME` writes OUT_DIR/NAME_before_K.json (CAPTURES captures of "before"),
OUT_DIR/NAME_after.json and OUT_DIR/NAME.json, the unprofiled timings. A process of its own so the pair starts
from the same state every time (no other pair's tensors, compiled code or heap before it); the caller pins
its mmap and trim thresholds (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), so a 2 MiB tensor is a heap block
reused call after call instead of fresh pages faulted in on some calls and not others, depending on what ran
before (a GPU's caching allocator reuses blocks the same way)."""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch.profiler import ProfilerActivity, profile, record_function

ITERS = 12  # steps per capture
CAPTURES = 8  # captures of "before": the advisor reads the least-disturbed one (least step time)
TIMED = 100  # unprofiled interleaved calls of each; "measured" takes the fastest of each
WARMUP = 3
Fn = Callable[[Any, Any], Any]


def rmsnorm_naive(x: Any, w: Any) -> Any:
    variance = (x * x).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + 1e-6) * w


def layernorm_naive(x: Any, w: Any) -> Any:
    mu = x.mean(-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(-1, keepdim=True)
    return d / torch.sqrt(var + 1e-5) * w + w


def layernorm_fused(x: Any, w: Any) -> Any:
    return F.layer_norm(x, (x.shape[-1],), w, w, 1e-5)


def attention_manual(q: Any, k: Any) -> Any:
    s = torch.matmul(q, k.transpose(-2, -1)) / 8.0
    return torch.matmul(torch.softmax(s, dim=-1), k)


def attention_fused(q: Any, k: Any) -> Any:
    return F.scaled_dot_product_attention(q, k, k, scale=1 / 8.0)


def loop_item(x: Any, w: Any) -> Any:
    total = 0.0
    for _ in range(20):
        total += (x[:4] * w).sum().item()
    return total


def loop_no_item(x: Any, w: Any) -> Any:
    total = torch.zeros(())
    for _ in range(20):
        total += (x[:4] * w).sum()
    return total


def inductor(fn: Fn) -> Fn:
    """The naive function fused by Inductor (one generated C++ loop nest per reduction group): on the CPU, torch's
    F.rms_norm is itself a composite of the same aten ops, so it is no fused "after". Compiled on its first call
    (the first unprofiled timed call, which "measured" never takes: it takes the fastest)."""
    with warnings.catch_warnings():  # Inductor's import touches torch.jit.script_method, deprecated in torch 2.13
        warnings.simplefilter("ignore", DeprecationWarning)
        import torch._inductor.compile_fx  # noqa: F401
    return torch.compile(fn, backend="inductor", dynamic=False)  # type: ignore[no-any-return]


# name -> the rule the advisor must put first on "before"
RULES = {"rmsnorm": "unfused-elementwise", "layernorm": "unfused-elementwise", "attention": "unfused-attention",
         "item": "sync-points"}
def pair(name: str) -> tuple[Fn, Fn, tuple[tuple[int, ...], ...]]:
    """(before, after, the two inputs' shapes) of one pair."""
    if name == "rmsnorm":
        return rmsnorm_naive, inductor(rmsnorm_naive), ((256, 2048), (2048,))
    if name == "layernorm":
        return layernorm_naive, layernorm_fused, ((256, 2048), (2048,))
    if name == "attention":  # scores [4, 8, 128, 128]: 2 MiB, the size where the CPU's fused kernel saves steadily
        return attention_manual, attention_fused, ((4, 8, 128, 32), (4, 8, 128, 32))
    return loop_item, loop_no_item, ((64, 2048), (2048,))


def capture(path: Path, fn: Fn, a: Any, b: Any) -> None:
    with torch.no_grad():
        for _ in range(WARMUP):
            fn(a, b)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(ITERS):
                with record_function("step"):
                    fn(a, b)
    prof.export_chrome_trace(str(path))


def timed(before: Fn, after: Fn, a: Any, b: Any) -> list[list[int]]:
    """TIMED unprofiled calls of each (ns), the two interleaved so drift on a shared machine hits both alike."""
    times: list[list[int]] = [[], []]
    with torch.no_grad():
        for _ in range(TIMED):
            for k, fn in enumerate((before, after)):
                t0 = time.perf_counter_ns()
                fn(a, b)
                times[k].append(time.perf_counter_ns() - t0)
    return times


def main(out: Path, name: str) -> None:
    torch.set_num_threads(1)  # one core: steadier times on a shared machine
    torch.manual_seed(0)
    before, after, shapes = pair(name)
    a, b = (torch.randn(*s) for s in shapes)
    times = timed(before, after, a, b)  # first: after the captures, the manual attention ran up to 45 % slower
    for k in range(CAPTURES):
        capture(out / f"{name}_before_{k}.json", before, a, b)
    capture(out / f"{name}_after.json", after, a, b)
    (out / f"{name}.json").write_text(json.dumps({"timed_ns": times}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
