"""torch-compile-recompiles on real CPU torch.compile profiles (torch 2.x's own event names, backend aot_eager so
the test does not wait for a C++ compiler): a function with a data-dependent branch (a graph break) called with a
changing shape (a recompilation), and the same function without the branch at one shape (no finding). Every
number is recomputed from the file with json and Decimal."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from explorer.store.runs import RunStore
from tests.analysis.advice.test_engine_rules import advise

RULE = "torch-compile-recompiles"


def profile(path: Path, shapes: list[int], branch: bool) -> Path:
    torch = pytest.importorskip("torch")
    torch._dynamo.reset()

    def f(x: Any) -> Any:
        y = torch.sin(x) * 2
        if branch and y.sum() > 0:  # data-dependent: Dynamo breaks the graph here
            y = y + 1
        return torch.relu(y)

    g = torch.compile(f, backend="aot_eager")
    with torch.profiler.profile() as prof:
        for s in shapes:
            g(torch.ones(s))
    prof.export_chrome_trace(str(path))
    return path


def x_events(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text(), parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def ns(v: Any) -> int:
    return int(Decimal(v) * 1000)


def within(inner: dict[str, Any], outer: dict[str, Any]) -> bool:
    return inner["tid"] == outer["tid"] and outer["ts"] <= inner["ts"] and \
        inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] and inner is not outer


def test_recompilations_and_graph_breaks_of_a_real_capture(store: RunStore, tmp_path: Path) -> None:
    path = profile(tmp_path / "compiled.json", [8, 8, 16, 16, 32], branch=True)
    ev = x_events(path)
    compiles = [e for e in ev if e["name"] == "entire_frame_compile"]
    tags = [e for e in ev if re.search(r"^entire_frame_compile_data: .*compile_id=(\d+)/(\d+)", e["name"])]
    ids = {}
    for c in compiles:
        tag = next(t for t in tags if within(t, c))
        ids[id(c)] = tuple(int(v) for v in re.search(r"compile_id=(\d+)/(\d+)", tag["name"]).groups())  # type: ignore[union-attr]
    recompiles = [c for c in compiles if ids[id(c)][1] >= 1]
    regions = [e for e in ev if e["name"].startswith("Torch-Compiled Region: ")]
    nested = [r for r in regions if any(within(r, o) for o in regions)]
    assert recompiles and nested  # the capture shows both

    findings = [f for f in advise(store, path)["findings"] if f["rule"] == RULE]
    assert len(findings) == 2
    rec = next(f for f in findings if f["saving_ns"] is not None)
    assert rec["saving_ns"] == rec["acts_on_ns"] == sum(ns(c["dur"]) for c in recompiles)
    facts = {x["label"]: x["value"] for x in rec["facts"]}
    assert facts["compilations in the profile"] == len(compiles)
    assert facts["recompilations (compile id F/C, C ≥ 1)"] == len(recompiles)
    brk = next(f for f in findings if f["saving_ns"] is None)
    bfacts = {x["label"]: x["value"] for x in brk["facts"]}
    assert bfacts["compiled regions run"] == len(regions) and bfacts["regions run after a graph break"] == len(nested)
    assert bfacts["resumed frames"] == len({r["name"].split(": ")[1].split("/")[0] for r in nested})
    assert brk["acts_on_ns"] == sum(ns(r["dur"]) for r in nested)
    assert "fullgraph=True" in brk["fix"] and "mark_dynamic" in rec["fix"]


def test_one_graph_at_one_shape_gets_no_finding(store: RunStore, tmp_path: Path) -> None:
    path = profile(tmp_path / "clean.json", [8, 8, 8], branch=False)
    ev = x_events(path)
    assert [e for e in ev if e["name"].startswith("Torch-Compiled Region: ")]  # it is a compiled run
    assert not [f for f in advise(store, path)["findings"] if f["rule"] == RULE]
