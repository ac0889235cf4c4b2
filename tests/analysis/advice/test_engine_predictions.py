"""Predictions checked against reality: real CPU torch.profiler captures of a "before" and an "after" (naive
RMSNorm vs the same compiled by Inductor, naive LayerNorm vs F.layer_norm, manual attention vs
scaled_dot_product_attention, a loop with .item() vs without, a DataLoader without and with workers). The advisor
on "before" must name the right finding first, the finding must be gone on "after", and its expected saving must
be within the stated tolerance of the measured one (docs/advice.md "Predicted against measured")."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.runs.run import Run

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402
from explorer.views.advice import compute_run_advice  # noqa: E402
from tests.helpers.advice_pairs import CAPTURES, ITERS, RULES  # noqa: E402

HELPER = Path(__file__).resolve().parents[2] / "helpers" / "advice_pairs.py"
# glibc's malloc pinned in the capturing process (see the helper's docstring): large blocks from the heap, never
# trimmed, so a tensor's pages are not faulted in on some calls and not others
PINNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 31)}
# predicted / measured must lie in [1 / f, f]. Seen on the shared 2-core box, 2026-12-06, also beside a process
# streaming 32 MB arrays: RMSNorm 0.98-1.47, LayerNorm 0.71-1.50, attention 0.56-2.24 (the CPU's flash kernel does
# more than the softmax's arithmetic the model keeps, and the manual path slows when memory is contended)
TOLERANCE = {"rmsnorm": 2.0, "layernorm": 2.0, "attention": 3.0}
ITEM_SLACK_NS = 200_000  # an .item() on a CPU tensor costs microseconds: noise-dominated, a loose absolute bound


def step_ns(path: Path) -> list[int]:
    """The `step` ranges' durations in ns, read with plain json + decimal."""
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    return [int(Decimal(e["dur"]) * 1000) for e in events if e.get("name") == "step" and e.get("ph") == "X"]


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("advice_pairs")
    store = RunStore(tmp / "data")
    out: dict[str, dict[str, Any]] = {}
    for name, rule in RULES.items():
        done = subprocess.run([sys.executable, str(HELPER), str(tmp), name], env={**os.environ, **PINNED_MALLOC},
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        captures = [tmp / f"{name}_before_{k}.json" for k in range(CAPTURES)]
        before = min(captures, key=lambda p: sum(step_ns(p)))  # the least-disturbed capture
        after = tmp / f"{name}_after.json"
        timed_before, timed_after = json.loads((tmp / f"{name}.json").read_text())["timed_ns"]
        rb, ra = ingest_paths(store, [before], f"{name} before"), ingest_paths(store, [after], f"{name} after")
        out[name] = {"rule": rule, "before": compute_run_advice(Run.of(store, rb.id)),
                     "after": compute_run_advice(Run.of(store, ra.id)), "before_steps": step_ns(before),
                     # the fastest unprofiled call of each, as the prediction reads the fastest capture
                     "measured_ns": min(timed_before) - min(timed_after)}
    yield out
    store.catalog.close()


def predicted_ns(m: dict[str, Any]) -> float:
    return float(m["before"]["findings"][0]["saving_ns"]) / ITERS


@pytest.mark.parametrize("name", sorted(RULES))
def test_the_right_finding_comes_first(measured: dict[str, dict[str, Any]], name: str) -> None:
    m = measured[name]
    assert m["before"]["findings"], name
    assert m["before"]["findings"][0]["rule"] == m["rule"]
    assert m["rule"] not in {f["rule"] for f in m["after"]["findings"]}


@pytest.mark.parametrize("name", sorted(TOLERANCE))
def test_predicted_saving_is_within_the_tolerance_of_the_measured_one(measured: dict[str, dict[str, Any]],
                                                                      name: str) -> None:
    m = measured[name]
    predicted = predicted_ns(m)
    ratio = predicted / m["measured_ns"] if m["measured_ns"] > 0 else float("inf")
    print(f"{name}: predicted {predicted / 1000:.1f} us/step, measured {m['measured_ns'] / 1000:.1f} us/step, "
          f"ratio {ratio:.2f}")
    assert m["measured_ns"] > 0, "the fix saved nothing"
    assert "streamed fastest" in m["before"]["findings"][0]["formula"]  # the host-only model priced it
    assert 1 / TOLERANCE[name] <= ratio <= TOLERANCE[name]
    assert m["before"]["findings"][0]["saving_ns"] <= sum(m["before_steps"])


def test_item_saving_is_bounded_by_the_measured_one(measured: dict[str, dict[str, Any]]) -> None:
    m = measured["item"]
    predicted = predicted_ns(m)
    print(f"item: predicted {predicted:.0f} ns/step, measured {m['measured_ns']:.0f} ns/step")
    assert 0 < predicted <= m["measured_ns"] + ITEM_SLACK_NS


# ---- a DataLoader with 0 workers against 2 ------------------------------------------------------------
# Loading and the step are sleeps (a slow file read; a device busy for the step), so the pair is not at the mercy
# of the shared CPU: each batch takes LOAD_S to load, each step STEP_S; with 2 workers prefetching, loading hides
# behind the step. Predicted: the DataLoader finding's saving per batch; measured: the difference of the median
# interval between step starts. Seen on the loaded 2-core box: predicted / measured 1.1-1.5 (the workers, starved
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
