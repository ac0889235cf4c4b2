"""The op table against the truth: torch.profiler's own key_averages() on real CPU profiles."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

from explorer.service import ingest_paths  # noqa: E402
from explorer.store.queries import load_ops  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402

TOLERANCE_US = 1.0
# key_averages() adds a "[memory]" pseudo-row for allocations outside any op; the explorer shows
# memory as counter tracks instead, so that row is not an op here.
NOT_OPS = {"[memory]"}


def mlp_step() -> Callable[[], None]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def step() -> None:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def conv_forward() -> Callable[[], None]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    x = torch.randn(4, 3, 16, 16)

    def step() -> None:
        with torch.no_grad():
            model(x)

    return step


def rmsnorm_naive() -> Callable[[], None]:
    x, w = torch.randn(8, 256), torch.randn(256)

    def step() -> None:
        with record_function("rmsnorm"):
            variance = (x * x).mean(-1, keepdim=True)
            x * torch.rsqrt(variance + 1e-6) * w

    return step


CASES: list[tuple[str, Callable[[], Callable[[], None]], dict[str, Any], int]] = [
    ("mlp_shapes", mlp_step, {"record_shapes": True}, 1),
    ("mlp_memory", mlp_step, {"profile_memory": True}, 1),
    ("conv_stack", conv_forward, {"with_stack": True}, 1),
    ("rmsnorm_schedule", rmsnorm_naive,
     {"record_shapes": True, "schedule": schedule(wait=1, warmup=1, active=2)}, 4),
]


def profile_to_file(make: Callable[[], Callable[[], None]], settings: dict[str, Any], steps: int,
                    path: Path) -> Any:
    step = make()
    step()  # warm-up outside the profile
    with profile(activities=[ProfilerActivity.CPU], **settings) as prof:
        for _ in range(steps):
            step()
            prof.step()
    prof.export_chrome_trace(str(path))
    return prof


@pytest.mark.slow
@pytest.mark.parametrize(("case", "make", "settings", "steps"), CASES, ids=[c[0] for c in CASES])
def test_op_table_equals_key_averages(tmp_path: Path, store: RunStore, case: str,
                                      make: Callable[[], Callable[[], None]], settings: dict[str, Any],
                                      steps: int) -> None:
    prof = profile_to_file(make, settings, steps, tmp_path / f"{case}.json")
    truth = {e.key: e for e in prof.key_averages() if e.key not in NOT_OPS}
    rec = ingest_paths(store, [tmp_path / f"{case}.json"])
    ours = {r["name"]: r for r in load_ops(store, rec.id, limit=None, view="all")}

    assert set(ours) == set(truth)
    for name, t in truth.items():
        row = ours[name]
        assert row["calls"] == t.count, name
        assert abs(row["cpu_total_ns"] / 1000 - t.cpu_time_total) <= TOLERANCE_US, name
        assert abs(row["self_cpu_ns"] / 1000 - t.self_cpu_time_total) <= TOLERANCE_US, name


@pytest.mark.slow
def test_op_table_by_input_shape_equals_key_averages(tmp_path: Path, store: RunStore) -> None:
    prof = profile_to_file(mlp_step, {"record_shapes": True}, 1, tmp_path / "shapes.json")
    truth = {(e.key, str(e.input_shapes).replace(" ", "")): e
             for e in prof.key_averages(group_by_input_shape=True) if e.key not in NOT_OPS}
    rec = ingest_paths(store, [tmp_path / "shapes.json"])
    ours = {(r["name"], r["input_shapes"].replace(" ", "")): r
            for r in load_ops(store, rec.id, limit=None, by_shape=True, view="all")}

    assert set(ours) == set(truth)
    for key, t in truth.items():
        assert ours[key]["calls"] == t.count, key
        assert abs(ours[key]["cpu_total_ns"] / 1000 - t.cpu_time_total) <= TOLERANCE_US, key
