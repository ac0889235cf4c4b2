"""The demo: profile three RMSNorm implementations with torch.profiler and ingest each trace as a run.

Torch is imported lazily (it is the optional `[torch]` extra). Nothing here prints or serves: the
CLI (api/cli.py) reports progress through the callbacks and starts the server afterwards. What the
profiler's C++ side writes to stderr goes through a filter that drops its log noise (`USDT:` lines).
"""

from __future__ import annotations

import io
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from explorer.errors import ExplorerError
from explorer.model.demo import ACTIVE_STEPS, COMPILED, DEMO_TAG, FUSED, NAIVE, RUN_NAMES

if TYPE_CHECKING:  # kept light at import: the store and ingest load only when the demo runs
    from explorer.store.runs import RunStore

log = logging.getLogger(__name__)

TORCH_MISSING = (
    "the demo needs PyTorch, which is not in this environment. Either install the explorer where your torch\n"
    "already is (pip install . from the checkout, in that environment), or add torch here:\n"
    "    pip install torch          (make run's environment: .venv-run/bin/pip install torch)"
)
EPS = 1e-6
WARMUP_CALLS = 3      # untraced calls first: allocator, kernel caches and lazy init settle
PROFILER_WARMUP = 2   # traced by the schedule but discarded, so the kept steps are steady-state
CPU_SHAPE = (8, 512, 1024)       # batch, sequence, hidden: a Llama-sized activation
DEVICE_SHAPE = (8, 2048, 4096)
COMPILE_TIMEOUT_S = 300.0

# What one step of the naive implementation launches: the six ops of the reference story.
NAIVE_OPS_PER_STEP = {"aten::mul": 3, "aten::mean": 1, "aten::add": 1, "aten::rsqrt": 1}

Notify = Callable[[str], None]
Progress = Callable[[float, str], None]


@dataclass
class DemoResult:
    """The runs the demo made (naive first: it is the comparison's baseline)."""

    run_ids: list[str]
    device: str
    skipped: dict[str, str] = field(default_factory=dict)  # variant -> why it did not run

    @property
    def compare_path(self) -> str:
        return "/compare?runs=" + ",".join(self.run_ids)


def import_torch() -> ModuleType:
    """torch, or an ExplorerError that says how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise ExplorerError(TORCH_MISSING) from exc
    return torch


def rmsnorm_naive(x: Any, weight: Any, eps: float = EPS) -> Any:
    """RMSNorm as six PyTorch ops, the way it is often first written."""
    import torch

    squared = x * x
    mean = squared.mean(-1, keepdim=True)
    shifted = mean + eps
    inv_rms = torch.rsqrt(shifted)
    normed = x * inv_rms
    return normed * weight


def rmsnorm_fused(x: Any, weight: Any, eps: float = EPS) -> Any:
    """RMSNorm as one call to torch.rms_norm."""
    import torch

    return torch.rms_norm(x, (x.shape[-1],), weight, eps)


def pick_device(torch: ModuleType, requested: str | None = None) -> str:
    """`requested`, else the accelerator present (CUDA, XPU, Neuron, ...), else cpu."""
    if requested:
        return requested
    accel = getattr(torch, "accelerator", None)
    if accel is not None and accel.is_available():
        current = accel.current_accelerator()
        if current is not None and current.type != "mps":  # the profiler has no MPS activity
            return str(current.type)
    return "cuda" if torch.cuda.is_available() else "cpu"


def profiler_activities(torch: ModuleType, device: str) -> list[Any]:
    """CPU plus the device's activity, so the runtime and hardware lanes fill."""
    act = torch.profiler.ProfilerActivity
    activities = [act.CPU]
    dtype = device.split(":")[0]
    named = {"cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA", "hpu": "HPU"}
    if dtype in named and hasattr(act, named[dtype]):
        activities.append(getattr(act, named[dtype]))
    elif dtype != "cpu" and dtype == torch._C._get_privateuse1_backend_name() and hasattr(act, "PrivateUse1"):
        activities.append(act.PrivateUse1)
    return activities


def _synchronize(torch: ModuleType, device: str) -> None:
    if device == "cpu":
        return
    accel = getattr(torch, "accelerator", None)
    if accel is not None and hasattr(accel, "synchronize"):
        accel.synchronize()
    elif device.startswith("cuda"):
        torch.cuda.synchronize()


def profile_variant(torch: ModuleType, fn: Callable[[Any, Any], Any], x: Any, weight: Any, device: str,
                    out_path: Path) -> Path:
    """Warm up, then trace ACTIVE_STEPS steady-state steps of `fn` into a Kineto trace.json."""
    from torch.profiler import profile, schedule

    with torch.no_grad():
        for _ in range(WARMUP_CALLS):
            fn(x, weight)
        _synchronize(torch, device)
        with profile(activities=profiler_activities(torch, device), record_shapes=True, profile_memory=True,
                     schedule=schedule(wait=0, warmup=PROFILER_WARMUP, active=ACTIVE_STEPS, repeat=1)) as prof:
            for _ in range(PROFILER_WARMUP + ACTIVE_STEPS):
                fn(x, weight)
                _synchronize(torch, device)
                prof.step()
    prof.export_chrome_trace(str(out_path))
    return out_path


def compile_variant(torch: ModuleType, x: Any, weight: Any, timeout_s: float) -> Callable[[Any, Any], Any]:
    """torch.compile of the naive RMSNorm, compiled once now; ExplorerError saying why if it cannot be.

    The first call is where compilation happens (and a missing C++ compiler or Triton shows); it runs
    in a thread so a compile that hangs cannot hold the demo past `timeout_s`.
    """
    compiled = torch.compile(rmsnorm_naive)
    outcome: list[BaseException | None] = []

    def first_call() -> None:
        try:
            with torch.no_grad():
                compiled(x, weight)
            outcome.append(None)
        except BaseException as exc:  # any failure means "not usable here"
            outcome.append(exc)

    worker = threading.Thread(target=first_call, name="demo-torch-compile", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not outcome:
        raise ExplorerError(f"torch.compile did not finish within {timeout_s:.0f} s")
    error = outcome[0]
    if error is not None:
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ExplorerError(f"torch.compile is not usable here: {type(error).__name__}: {first_line[:300]}")
    return compiled  # type: ignore[no-any-return]


# Lines libkineto logs to stderr from C++ on every profiler start/stop (no setting silences them:
# KINETO_LOG_LEVEL leaves the USDT lines, TORCH_CPP_LOG_LEVEL does not reach them).
PROFILER_NOISE = (b"USDT:", b"STAGE:")


def _forward_lines(read_fd: int, write_fd: int, noise: tuple[bytes, ...]) -> None:
    """Copy lines from the pipe to the real stderr, leaving out profiler noise; ends at EOF."""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        pending = b""
        while chunk := pipe.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if not line.lstrip().startswith(noise))
            if kept:
                try:
                    os.write(write_fd, kept)
                except OSError:
                    return
        if pending and not pending.lstrip().startswith(noise):
            os.write(write_fd, pending)
    os.close(write_fd)


@contextmanager
def quiet_profiler_noise(noise: tuple[bytes, ...] = PROFILER_NOISE) -> Iterator[None]:
    """Inside: file descriptor 2 (where native code writes) is a pipe that drops `noise` lines, while
    Python's sys.stderr writes to the real stderr directly, so progress bars are not delayed or filtered.
    Does nothing when stderr has no file descriptor (a test's captured stream)."""
    try:
        sys.stderr.flush()
        real = os.dup(2)
    except (AttributeError, OSError, ValueError):
        yield
        return
    read_fd, write_fd = os.pipe()
    forwarder = threading.Thread(target=_forward_lines, args=(read_fd, os.dup(real), noise),
                                 name="demo-stderr-filter", daemon=True)
    forwarder.start()
    saved_stderr = sys.stderr
    os.dup2(write_fd, 2)
    os.close(write_fd)
    sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(real), "wb", buffering=0), encoding=saved_stderr.encoding,
                                  errors="backslashreplace", line_buffering=True, write_through=True)
    try:
        yield
    finally:
        sys.stderr.flush()
        own, sys.stderr = sys.stderr, saved_stderr
        own.close()
        os.dup2(real, 2)  # the pipe's last writer in this process is gone: the forwarder drains and ends
        os.close(real)
        forwarder.join(timeout=2.0)  # compile workers may still hold the pipe; they keep being filtered


def run_demo(store: RunStore, *, device: str | None = None, shape: tuple[int, ...] | None = None,
             use_compile: bool = True, compile_timeout_s: float = COMPILE_TIMEOUT_S,
             notify: Notify | None = None, progress: Progress | None = None) -> DemoResult:
    """Profile the RMSNorm variants, ingest each trace as a run tagged `demo`; naive run first."""
    from explorer.runs.ingest import ingest_paths

    torch = import_torch()
    say = notify or (lambda _msg: None)
    report = progress or (lambda _f, _w: None)
    dev = pick_device(torch, device)
    shape = shape or (CPU_SHAPE if dev == "cpu" else DEVICE_SHAPE)
    say(f"torch {torch.__version__}, profiling on {dev}"
        + (" (no accelerator found: only the framework lane will fill)" if dev == "cpu" else ""))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=generator).to(dev)
    weight = (1.0 + 0.1 * torch.randn(shape[-1], generator=generator)).to(dev)

    variants: list[tuple[str, Callable[[Any, Any], Any] | None]] = [(NAIVE, rmsnorm_naive), (FUSED, rmsnorm_fused)]
    if use_compile:
        variants.append((COMPILED, None))  # compiled lazily, only when its turn comes
    result = DemoResult(run_ids=[], device=dev)
    if not use_compile:
        result.skipped[COMPILED] = "not requested"
        say("torch.compile variant not requested: two runs")
    steps = 2 * len(variants)
    with tempfile.TemporaryDirectory(prefix="trace-explorer-demo-") as tmp, quiet_profiler_noise():
        for i, (key, fn) in enumerate(variants):
            name = RUN_NAMES[key]
            if fn is None:
                report((2 * i) / steps, f"torch.compile: compiling {name} (first time can take a minute)")
                started = time.monotonic()
                try:
                    fn = compile_variant(torch, x, weight, compile_timeout_s)
                except ExplorerError as exc:
                    result.skipped[key] = exc.message
                    say(f"{exc.message} — continuing with {len(result.run_ids)} runs")
                    continue
                say(f"torch.compile ready in {time.monotonic() - started:.1f} s")
            report((2 * i) / steps, f"profiling {name}")
            trace = profile_variant(torch, fn, x, weight, dev, Path(tmp) / f"rmsnorm_{key}.trace.json")

            def ingest_progress(fraction: float, what: str, i: int = i, name: str = name) -> None:
                report((2 * i + 1 + fraction) / steps, f"ingesting {name}: {what}")

            rec = ingest_paths(store, [trace], name, progress=ingest_progress)
            store.catalog.set_tags(rec.id, [DEMO_TAG, dev.split(":")[0]])
            result.run_ids.append(rec.id)
            say(f"{name}: run {rec.id}, {rec.summary.slices:,} events")
    report(1.0, "done")
    return result


@dataclass
class VariantSummary:
    """One line of the demo's closing table: what a step cost, against the naive baseline."""

    run_id: str
    name: str
    per_step_ns: int
    clock: str            # "device" when an accelerator ran it, else "CPU"
    pct_vs_baseline: float | None


def summarize(store: RunStore, result: DemoResult) -> list[VariantSummary]:
    """Time per step of each demo run: device time when there is any, else the CPU time of a step."""
    from explorer.store.queries import load_ops

    rows: list[VariantSummary] = []
    for run_id in result.run_ids:
        rec = store.get(run_id)
        device_ns = rec.summary.device_total_ns
        if device_ns > 0:
            total, clock = device_ns, "device"
        else:
            steps = load_ops(store, run_id, name_filter="ProfilerStep")
            total, clock = (int(steps[0]["cpu_total_ns"]) if steps else 0), "CPU"
        per_step = total // ACTIVE_STEPS
        base = rows[0].per_step_ns if rows else per_step
        pct = None if not rows or base == 0 else 100.0 * (per_step - base) / base
        rows.append(VariantSummary(run_id, rec.name, per_step, clock, pct))
    return rows
