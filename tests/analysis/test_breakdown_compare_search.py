"""Pure functions: interval union, compare rows, search matching, the SQL statement check."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from explorer.analysis.compare import RunOps, compute_compare, pct_change
from explorer.analysis.intervals import union_segments
from explorer.analysis.search import match_strings
from explorer.errors import BadRequest, QueryRejected
from explorer.model.tables import OP_STATS
from explorer.store.sql import check_select


@pytest.mark.parametrize("ts, end, expect", [
    ([], [], []),
    ([0, 5, 20], [10, 8, 30], [(0, 10), (20, 30)]),
    ([20, 0], [30, 25], [(0, 30)]),
    ([0, 10], [10, 20], [(0, 20)]),
])
def test_union_segments(ts: list[int], end: list[int], expect: list[tuple[int, int]]) -> None:
    a, b = union_segments(np.asarray(ts, np.int64), np.asarray(end, np.int64))
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == expect


def _ops(rows: dict[str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"name": n, "input_shapes": "", "calls": 1, "cpu_total_ns": 10, "self_cpu_ns": 10,
                                  "cpu_avg_ns": 10, "device_total_ns": d, "self_device_ns": d, "device_pct": 0.0}
                                 for n, d in rows.items()], schema=OP_STATS)


def test_compare_rmsnorm_shape() -> None:
    naive = RunOps("a", "naive", _ops({"aten::mul": 1_164_500, "aten::add": 434_600}), 2_355_000)
    fused = RunOps("b", "fused", _ops({"aten::rms_norm": 403_000}), 403_000)
    out = compute_compare([naive, fused])
    status = {r["name"]: r["status"] for r in out["rows"]}
    assert status == {"aten::mul": "removed", "aten::add": "removed", "aten::rms_norm": "added"}
    assert round(out["headline"]["pct_change"][1], 1) == -82.9
    assert pct_change(0, 5) is None


def test_match_strings() -> None:
    values = pa.array(["aten::mul", "aten::MUL_", "cudaLaunchKernel", None])
    assert match_strings(values, "mul", regex=False).tolist() == [True, True, False, False]
    assert match_strings(values, "^aten::mul$", regex=True).tolist() == [True, False, False, False]
    with pytest.raises(BadRequest):
        match_strings(values, "(", regex=True)


@pytest.mark.parametrize("sql", ["select 1", "with a as (select 1) select * from a", "SELECT 1 -- comment"])
def test_check_select_allows(sql: str) -> None:
    check_select(sql)


@pytest.mark.parametrize("sql", ["", "select 1; select 2", "update slices set name = 'x'", "explain select 1",
                                 "call pragma_version()", "export database '/tmp/x'"])
def test_check_select_rejects(sql: str) -> None:
    with pytest.raises(QueryRejected):
        check_select(sql)
