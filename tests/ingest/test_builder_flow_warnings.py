"""Flow steps without a partner (an `s` without its `f`, an `f` without its `s`) are not drawn, and the run says
so: a `flow_unpaired` warning whose count equals the flow steps the file holds alone, read with plain json."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore


def _x(name: str, ts: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": 5.0}


def _flow(ph: str, fid: int, ts: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": ph, "cat": "flow", "name": "f", "id": fid, "pid": 1, "tid": tid, "ts": ts, "bp": "e"}


def trace(offset: float) -> dict[str, Any]:
    return {"traceEvents": [
        _x("a", offset + 0), _x("b", offset + 10, tid=2), _x("c", offset + 20), _x("d", offset + 30, tid=2),
        _flow("s", 1, offset + 1), _flow("f", 1, offset + 11, tid=2),  # a pair: drawn
        _flow("s", 2, offset + 21),  # a start alone
        _flow("f", 3, offset + 31, tid=2),  # an end alone
    ]}


def lone_steps(doc: dict[str, Any]) -> int:
    steps = Counter(e["id"] for e in doc["traceEvents"] if e["ph"] in ("s", "t", "f"))
    return sum(1 for n in steps.values() if n == 1)


def warnings(store: RunStore, run_id: str) -> dict[str, int]:
    return {w.code: w.count for w in store.catalog.get(run_id).summary.warnings}


def test_lone_flow_steps_are_a_warning_with_their_count(tmp_path: Path) -> None:
    doc = trace(0)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    store = RunStore(tmp_path / "data")
    run_id = ingest_paths(store, [path]).id
    assert warnings(store, run_id).get("flow_unpaired") == lone_steps(doc) == 2
    assert store.table(run_id, "flows").num_rows == 1  # the pair is drawn


def test_lone_steps_of_several_files_add_up(tmp_path: Path) -> None:
    docs = [trace(0), trace(100)]
    paths = []
    for k, doc in enumerate(docs):
        paths.append(tmp_path / f"rank{k}.json")
        paths[-1].write_text(json.dumps({**doc, "distributedInfo": {"rank": k}}))
    store = RunStore(tmp_path / "data")
    run_id = ingest_paths(store, paths).id
    assert warnings(store, run_id).get("flow_unpaired") == sum(lone_steps(d) for d in docs) == 4


def test_a_file_with_every_flow_paired_has_no_such_warning(tmp_path: Path) -> None:
    doc = {"traceEvents": [_x("a", 0), _x("b", 10, tid=2), _flow("s", 1, 1), _flow("f", 1, 11, tid=2)]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    store = RunStore(tmp_path / "data")
    assert "flow_unpaired" not in warnings(store, ingest_paths(store, [path]).id)
