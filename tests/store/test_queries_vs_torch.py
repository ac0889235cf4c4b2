"""The op table against the truth: torch.profiler's own key_averages() on real CPU profiles."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.queries import has_module_frames, load_ops  # noqa: E402
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


# ---- views and module grouping on a with_stack, with_modules profile ------------------------------

def nested_sequential() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Sequential(nn.Linear(32, 8), nn.Tanh()), nn.ReLU())


LEAF_OPS = {nn.Linear: "aten::linear", nn.ReLU: "aten::relu", nn.Tanh: "aten::tanh"}
STEPS = 2


def profile_modules(path: Path) -> tuple[Any, nn.Module]:
    model, x = nested_sequential(), torch.randn(4, 16)
    model(x)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, with_modules=True) as prof:
        for _ in range(STEPS):
            model(x)
    prof.export_chrome_trace(str(path))
    return prof, model


def module_tree_paths(model: nn.Module) -> dict[str, tuple[str, type]]:
    """named_modules() path -> (the path torch's python tracer gives: "<Class>_<n>" per instance,
    numbered per class in first-call order, which for nn.Sequential is pre-order), class)."""
    counters: dict[str, int] = {}
    short: dict[str, str] = {}
    out: dict[str, tuple[str, type]] = {}
    for name, module in model.named_modules():
        cls = type(module).__name__
        short[name] = f"{cls}_{counters.get(cls, 0)}"
        counters[cls] = counters.get(cls, 0) + 1
        parts = name.split(".") if name else []
        chain = [short[""]] + [short[".".join(parts[:i + 1])] for i in range(len(parts))]
        out[name] = ("/".join(chain), type(module))
    return out


@pytest.fixture(scope="module")
def module_profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, nn.Module, Path]:
    path = tmp_path_factory.mktemp("modules") / "modules.json"
    prof, model = profile_modules(path)
    return prof, model, path


@pytest.mark.slow
def test_views_split_key_averages_into_operators_and_python_frames(
        store: RunStore, module_profile: tuple[Any, nn.Module, Path]) -> None:
    prof, _, path = module_profile
    truth = {e.key: e for e in prof.key_averages() if e.key not in NOT_OPS}
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    python_names = {e["name"] for e in events if e.get("cat") == "python_function"}
    other_names = {e["name"] for e in events if e.get("cat") != "python_function"}
    assert python_names and truth.keys() & python_names  # the profile really has python frame rows
    rec = ingest_paths(store, [path])
    views = {v: {r["name"]: r for r in load_ops(store, rec.id, view=v)} for v in ("operators", "python", "all")}

    assert set(views["all"]) == set(truth)
    assert set(views["operators"]) == {k for k in truth if k in other_names}
    assert set(views["python"]) == {k for k in truth if k not in other_names}
    assert not set(views["operators"]) & (python_names - other_names)
    for view in ("operators", "python"):
        for name, row in views[view].items():
            assert row["calls"] == truth[name].count, name
            assert abs(row["self_cpu_ns"] / 1000 - truth[name].self_cpu_time_total) <= TOLERANCE_US, name
        assert sum(r["device_pct"] for r in views[view].values()) <= 100


@pytest.mark.slow
def test_by_module_rows_follow_the_module_tree(store: RunStore, module_profile: tuple[Any, nn.Module, Path]) -> None:
    _, model, path = module_profile
    rec = ingest_paths(store, [path])
    assert has_module_frames(store, rec.id)
    rows = {(r["module"], r["name"]): r for r in load_ops(store, rec.id, view="operators", by_module=True)}
    tree = module_tree_paths(model)
    leaves = {p: cls for p, cls in tree.values() if cls in LEAF_OPS}
    assert {m for m, _ in rows} - {""} == set(leaves)
    for p, cls in leaves.items():
        assert rows[(p, LEAF_OPS[cls])]["calls"] == STEPS, p
    frames = {(r["module"], r["name"]) for r in load_ops(store, rec.id, view="python", by_module=True)
              if r["name"].startswith("nn.Module: ")}
    for p, _ in tree.values():  # each module frame sits under its parents' frames
        outer, _, own = p.rpartition("/")
        assert (outer, f"nn.Module: {own}") in frames, p
    by_name = {r["name"]: r["calls"] for r in load_ops(store, rec.id, view="operators")}
    per_module: dict[str, int] = {}
    for (_, name), r in rows.items():
        per_module[name] = per_module.get(name, 0) + r["calls"]
    assert per_module == by_name
