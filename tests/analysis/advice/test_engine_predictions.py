"""Predictions checked against reality: real CPU torch.profiler captures of a "before" and an "after" (naive
RMSNorm / LayerNorm vs the same compiled by Inductor, manual attention vs scaled_dot_product_attention, a loop with
.item() vs without, a DataLoader without and with workers). The advisor on "before" must name the right finding
first; its expected saving is held against the unprofiled measured saving with the bounds below."""

from __future__ import annotations

import json
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.run import Run

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402, N812
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402
from explorer.views.advice import compute_run_advice  # noqa: E402

ITERS = 12
TIMED = 100
WARMUP = 3
CAPTURES = 5  # "before" is profiled this many times; the advisor reads the least-disturbed capture (least step time)
# On the shared 2-core box other jobs preempt the profiled ops (one op of a capture took 0.76 ms for 50 us of work),
# so, as "measured" takes the fastest of TIMED calls, the prediction reads the fastest of CAPTURES captures. What
# holds then for the two elementwise pairs (the "after" fused by Inductor): the fix really saves time, and the
# prediction is an upper bound of the saving (docs/advice.md "Predicted against measured" has the ratios and why
# they are above 1 on a CPU). The .item() pair is noise-dominated on a CPU (an item costs microseconds): a loose
# absolute bound only.
ITEM_SLACK_NS = 200_000


def rmsnorm_naive(x: Any, w: Any) -> Any:
    variance = (x * x).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + 1e-6) * w


def layernorm_naive(x: Any, w: Any) -> Any:
    mu = x.mean(-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(-1, keepdim=True)
    return d / torch.sqrt(var + 1e-5) * w + w


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


def capture(path: Path, fn: Callable[[Any, Any], Any], a: Any, b: Any) -> Path:
    with torch.no_grad():
        for _ in range(WARMUP):
            fn(a, b)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(ITERS):
                with record_function("step"):
                    fn(a, b)
    prof.export_chrome_trace(str(path))
    return path


def timed_difference(before: Callable[[Any, Any], Any], after: Callable[[Any, Any], Any], a: Any, b: Any) -> float:
    """Fastest step time of `before` minus that of `after`, measured without the profiler (whose per-op cost
    would favour the fused call), the two interleaved so drift on a shared machine hits both alike."""
    times: dict[int, list[int]] = {0: [], 1: []}
    with torch.no_grad():
        for _ in range(TIMED):
            for k, fn in enumerate((before, after)):
                t0 = time.perf_counter_ns()
                fn(a, b)
                times[k].append(time.perf_counter_ns() - t0)
    return min(times[0]) - min(times[1])  # the least-disturbed run of each: load on the box only adds time


def step_ns(path: Path) -> list[int]:
    """The `step` ranges' durations in ns, read with plain json + decimal."""
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    return [int(Decimal(e["dur"]) * 1000) for e in events if e.get("name") == "step" and e.get("ph") == "X"]


def inductor(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The naive function fused by Inductor: on the CPU, one generated C++ kernel per reduction group (F.rms_norm
    on the CPU is itself a composite of the same aten ops, so it is no fused "after"). Compiled on the first call,
    in the capture's warm-up, outside the profile."""
    with warnings.catch_warnings():  # Inductor's import touches torch.jit.script_method, deprecated in torch 2.13
        warnings.simplefilter("ignore", DeprecationWarning)
        import torch._inductor.compile_fx  # noqa: F401
    return torch.compile(fn, backend="inductor", dynamic=False)  # type: ignore[no-any-return]


PAIRS: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any], str]] = {
    "rmsnorm": (rmsnorm_naive, inductor(rmsnorm_naive), "unfused-elementwise"),
    "layernorm": (layernorm_naive, inductor(layernorm_naive), "unfused-elementwise"),
    "attention": (attention_manual, attention_fused, "unfused-attention"),
    "item": (loop_item, loop_no_item, "sync-points"),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("advice_pairs")
    store = RunStore(tmp / "data")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core: steadier times on a shared machine
    torch.manual_seed(0)
    inputs = {"rmsnorm": (torch.randn(256, 2048), torch.randn(2048)),
              "layernorm": (torch.randn(256, 2048), torch.randn(2048)),
              "attention": (torch.randn(2, 4, 128, 64), torch.randn(2, 4, 128, 64)),
              "item": (torch.randn(64, 2048), torch.randn(2048))}
    out: dict[str, dict[str, Any]] = {}
    try:
        for name, (before, after, rule) in PAIRS.items():
            a, b = inputs[name]
            pb = min((capture(tmp / f"{name}_before_{k}.json", before, a, b) for k in range(CAPTURES)),
                     key=lambda path: sum(step_ns(path)))
            pa_ = capture(tmp / f"{name}_after.json", after, a, b)
            rb, ra = ingest_paths(store, [pb], f"{name} before"), ingest_paths(store, [pa_], f"{name} after")
            out[name] = {"rule": rule, "before": compute_run_advice(Run.of(store, rb.id)),
                         "after": compute_run_advice(Run.of(store, ra.id)),
                         "before_steps": step_ns(pb),
                         "profiled_ns": statistics.median(step_ns(pb)) - statistics.median(step_ns(pa_)),
                         "measured_ns": timed_difference(before, after, a, b)}
    finally:
        torch.set_num_threads(threads)
    yield out
    store.catalog.close()


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_right_finding_comes_first(measured: dict[str, dict[str, Any]], name: str) -> None:
    m = measured[name]
    assert m["before"]["findings"], name
    assert m["before"]["findings"][0]["rule"] == m["rule"]
    assert m["rule"] not in {f["rule"] for f in m["after"]["findings"]}


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm", "attention"])
def test_predicted_saving_is_near_the_measured_one(measured: dict[str, dict[str, Any]], name: str) -> None:
    m = measured[name]
    top = m["before"]["findings"][0]
    predicted = top["saving_ns"] / ITERS
    print(f"{name}: predicted {predicted:.0f} ns/step, measured {m['measured_ns']:.0f} ns/step, "
          f"profiled {m['profiled_ns']:.0f} ns/step, ratio {predicted / m['measured_ns']:.2f}")
    # the loose bound (timing noise on a shared 2-core box rules out a tight one): a positive saving that is
    # less than the profiled steps themselves; the ratio to the measured difference is reported in docs/advice.md
    assert 0 < top["saving_ns"] < sum(m["before_steps"])


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm"])
def test_fusing_saves(measured: dict[str, dict[str, Any]], name: str) -> None:
    """The Inductor-fused "after" is faster than the naive chain, and the advisor predicts a saving for it. How the
    two compare is printed and reported in docs/advice.md, not asserted: on this shared CPU box the ratio ranged from
    1.0 to 15.6 (the CI's PostgreSQL half, run beside another worker, once measured a saving equal to the
    prediction), so no bound between them holds."""
    m = measured[name]
    predicted = m["before"]["findings"][0]["saving_ns"] / ITERS
    print(f"{name}: predicted {predicted:.0f} ns/step, measured {m['measured_ns']:.0f} ns/step")
    assert m["measured_ns"] > 0 and predicted > 0


def test_item_saving_is_bounded_by_the_measured_one(measured: dict[str, dict[str, Any]]) -> None:
    m = measured["item"]
    predicted = m["before"]["findings"][0]["saving_ns"] / ITERS
    print(f"item: predicted {predicted:.0f} ns/step, measured {m['measured_ns']:.0f} ns/step")
    assert 0 < predicted <= m["measured_ns"] + ITEM_SLACK_NS


# ---- a DataLoader with 0 workers against 2 ------------------------------------------------------------
# Loading and the step are sleeps (a slow file read; a device busy for the step), so the pair is not at the mercy
# of the shared CPU: each batch takes LOAD_S to load, each step STEP_S; with 2 workers prefetching, loading hides
# behind the step. Predicted: the DataLoader finding's saving per batch; measured: the difference of the median
# interval between step starts. Seen on the loaded 2-core box: predicted / measured 1.2-1.5 (the workers, starved
# of CPU, still keep the loop waiting a little); the tolerance is a factor of 2 either way so load cannot flake it.
LOAD_S, STEP_S, BATCHES = 0.008, 0.020, 12
LOADER_TOLERANCE = (0.5, 2.0)


class SlowDataset(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 4 * BATCHES

    def __getitem__(self, i: int) -> Any:
        time.sleep(LOAD_S / 4)
        return torch.ones(4)


def loader_capture(path: Path, workers: int) -> Path:
    loader = torch.utils.data.DataLoader(SlowDataset(), batch_size=4, num_workers=workers)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _batch in loader:
            with record_function("step"):
                time.sleep(STEP_S)
    prof.export_chrome_trace(str(path))
    return path


def step_starts_ns(path: Path) -> list[int]:
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    return sorted(int(Decimal(e["ts"]) * 1000) for e in events if e.get("name") == "step" and e.get("ph") == "X")


def test_dataloader_workers_prediction(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    before, after = loader_capture(tmp_path / "w0.json", 0), loader_capture(tmp_path / "w2.json", 2)
    advice = compute_run_advice(Run.of(store, ingest_paths(store, [before]).id))
    top = advice["findings"][0]
    assert top["rule"] == "dataloader-stalls" and "num_workers" in top["fix"]
    after_advice = compute_run_advice(Run.of(store, ingest_paths(store, [after]).id))
    still = [f["saving_ns"] or 0 for f in after_advice["findings"] if f["rule"] == "dataloader-stalls"]
    assert sum(still) < top["saving_ns"]  # less waiting with workers (their start-up can still show in a fetch)

    def interval(path: Path) -> float:
        s = step_starts_ns(path)
        return statistics.median(b - a for a, b in zip(s, s[1:], strict=False))

    measured = interval(before) - interval(after)
    predicted = top["saving_ns"] / (BATCHES - 1)  # the first fetch is not counted
    print(f"dataloader: predicted {predicted:.0f} ns/step, measured {measured:.0f} ns/step")
    assert LOADER_TOLERANCE[0] <= predicted / measured <= LOADER_TOLERANCE[1]
    store.catalog.close()
