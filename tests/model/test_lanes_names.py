"""One place for lane names: code compares lanes with the `Lane` enum (explorer/model/lanes.py), never with
string literals. "counter" and "other" are also track kinds and kernel categories, so the scan covers
the three lane names that mean nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from explorer.model.lanes import Lane

ROOT = Path(__file__).resolve().parents[2]
LANE_ONLY_NAMES = {Lane.FRAMEWORK.value, Lane.RUNTIME.value, Lane.HARDWARE.value}
# path -> how many literals it may still hold (none now)
PENDING: dict[str, int] = {}


def lane_literals(source: str) -> list[str]:
    """Lane names written as string literals where a value is compared or passed (`lane == "runtime"`,
    `pc.equal(col, "hardware")`), as `line: text`; dict keys and messages are not comparisons."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call):
            operands = [*node.args, *(k.value for k in node.keywords)]
        else:
            continue
        for op in operands:
            elements = op.elts if isinstance(op, ast.Tuple | ast.List | ast.Set) else [op]
            found += [f"{node.lineno}: {e.value}" for e in elements
                      if isinstance(e, ast.Constant) and e.value in LANE_ONLY_NAMES]
    return found


@pytest.mark.parametrize(("source", "found"), [
    ('if lane == "hardware": pass', ["1: hardware"]),
    ('x = pc.equal(col, "runtime")', ["1: runtime"]),
    ('ok = lane in ("framework", "runtime")', ["1: framework", "1: runtime"]),
    ('x = np.where(m, "runtime", lane)', ["1: runtime"]),
    ("if lane == Lane.HARDWARE: pass", []),
    ('COLORS = {"hardware": "#59a14f"}', []),
    ('log.info("framework ops")', []),
])
def test_lane_literals_are_found(source: str, found: list[str]) -> None:
    assert lane_literals(source) == found


def test_lanes_are_named_by_the_enum() -> None:
    offenders = {}
    for path in sorted([*(ROOT / "explorer").rglob("*.py"), *(ROOT / "api").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "explorer/model/lanes.py":
            continue
        found = lane_literals(path.read_text())
        if len(found) > PENDING.get(rel, 0):
            offenders[rel] = found
    assert offenders == {}
