"""The demo's runs as plain data: their tag, names and step count, and the note its compare page shows.

Here, below both, so that the demo (which makes the runs, explorer.demo) and the renderer (which shows
the note) need not import each other. No torch, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

DEMO_TAG = "demo"
ACTIVE_STEPS = 10     # steps the trace keeps (more steps, steadier averages); call counts are multiples

NAIVE = "naive"
FUSED = "fused"
COMPILED = "compiled"
RUN_NAMES = {
    NAIVE: "RMSNorm naive (6 ops)",
    FUSED: "RMSNorm fused torch.rms_norm",
    COMPILED: "RMSNorm torch.compile",
}

# The "what you are looking at" note for the compare page (shown when the compared runs are tagged
# `demo`); plain text, one paragraph per item, written for someone who has never used a profiler.
WHAT_YOU_ARE_LOOKING_AT: tuple[str, ...] = (
    "These runs compute the same thing three ways: RMSNorm, the normalization layer of Llama-style "
    "models (y = x / sqrt(mean(x²) + eps) · weight). Each run is a trace written by torch.profiler while "
    f"the code ran {ACTIVE_STEPS} times.",
    "“RMSNorm naive (6 ops)” writes it as six separate PyTorch operations: x*x, mean, +eps, rsqrt, "
    "and two multiplies. Each one reads and writes the whole tensor and, on an accelerator, launches its "
    "own kernel, with idle gaps in between.",
    "“RMSNorm fused torch.rms_norm” calls PyTorch's built-in RMSNorm (one call; on a GPU one fused "
    "kernel; on a CPU it runs the same steps internally, so expect a smaller gain). "
    "“RMSNorm torch.compile” lets the compiler turn the naive code into one generated kernel.",
    "Each table row is one operation, as in torch.profiler's key_averages(): calls is how many times it "
    "ran, device time is time spent executing on the accelerator, CPU time is time spent on the host "
    "(the only time there is on a CPU-only machine). The first run is the baseline; the change column "
    "says how much faster (negative) or slower each other run is.",
    "Open a run to see its timeline: framework ops (what your Python code called) on top, runtime calls "
    "(kernel launches) in the middle, hardware executions at the bottom, with arrows linking each op to "
    "the work it caused. Fusion removes both the launches and the gaps.",
)


def demo_note(run_names: Iterable[str]) -> tuple[str, ...]:
    """The note for a compare page whose runs are all demo runs; () for any other comparison."""
    names = list(run_names)
    return WHAT_YOU_ARE_LOOKING_AT if names and set(names) <= set(RUN_NAMES.values()) else ()
