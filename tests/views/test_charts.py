"""Plotly figure builders: pure model -> figure dicts, labels made inert, the right metric and order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from explorer.views.charts import (
    compare_metric,
    label,
    make_compare_figure,
    make_lane_breakdown_figure,
    make_top_ops_figure,
    time_unit,
)


def op(name: str, device: int, cpu: int, calls: int = 1) -> dict[str, Any]:
    return {"name": name, "calls": calls, "device_total_ns": device, "cpu_total_ns": cpu, "self_cpu_ns": cpu}


@pytest.mark.parametrize(("text", "shown"), [
    ("aten::mul", "aten::mul"),
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ('"><img src=x onerror=alert(1)>', '"&gt;&lt;img src=x onerror=alert(1)&gt;'),
    ("<b>bold</b> & <a href='javascript:x'>", "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;a href='javascript:x'&gt;"),
    ("x" * 60, "x" * 47 + "…"),
])
def test_label_is_inert_for_plotly_markup(text: str, shown: str) -> None:
    assert label(text) == shown


def test_top_ops_sorted_limited_and_positive() -> None:
    rows = [op(f"op{i}", device=i * 1000, cpu=10) for i in range(30)]
    fig = make_top_ops_figure(rows, "device_total_ns", top=5)
    bar = fig["data"][0]
    assert bar["y"] == ["op29", "op28", "op27", "op26", "op25"]
    assert bar["x"] == [29.0, 28.0, 27.0, 26.0, 25.0]  # µs
    assert make_top_ops_figure([op("a", 0, 0)], "device_total_ns")["data"][0]["y"] == []
    json.dumps(fig, allow_nan=False)


def test_lane_breakdown_skips_counters() -> None:
    bd = {"lanes": [{"lane": "framework", "busy_ns": 2000, "idle_ns": 1000, "busy_pct": 66.7},
                    {"lane": "counter", "busy_ns": 0, "idle_ns": 3000, "busy_pct": 0.0},
                    {"lane": "hardware", "busy_ns": 1500, "idle_ns": 1500, "busy_pct": 50.0}]}
    fig = make_lane_breakdown_figure(bd)
    busy, idle = fig["data"]
    assert busy["y"] == ["framework", "hardware"] and busy["x"] == [2.0, 1.5] and idle["x"] == [1.0, 1.5]
    assert fig["layout"]["barmode"] == "stack"


def compare(device: tuple[int, int]) -> dict[str, Any]:
    """Two runs where `outer` holds `aten::mul` (its device total is the child's, its self time 0)."""
    per = [{"calls": 3, "device_total_ns": device[0], "self_device_ns": device[0], "cpu_total_ns": 5000,
            "self_cpu_ns": 5000},
           {"calls": 1, "device_total_ns": device[1], "self_device_ns": device[1], "cpu_total_ns": 1000,
            "self_cpu_ns": 1000}]
    outer = [{**p, "self_device_ns": 0, "cpu_total_ns": p["cpu_total_ns"] + 100, "self_cpu_ns": 100} for p in per]
    return {"runs": [{"id": "a", "name": "naive", "device_total_ns": device[0], "cpu_total_ns": 5100},
                     {"id": "b", "name": "<i>fused</i>", "device_total_ns": device[1], "cpu_total_ns": 1100}],
            "rows": [{"name": "outer", "status": "common", "per_run": outer},
                     {"name": "aten::mul", "status": "common", "per_run": per},
                     {"name": "aten::rms_norm", "status": "added", "per_run": [None, per[1]]}]}


def test_compare_charts_self_device_time_so_a_parent_is_not_counted_twice() -> None:
    data = compare((2_355_000, 403_000))
    assert compare_metric(data) == "device_total_ns"
    fig = make_compare_figure(data)
    assert [t["name"] for t in fig["data"]] == ["naive", "&lt;i&gt;fused&lt;/i&gt;"]
    assert fig["data"][0]["x"] == ["aten::mul", "aten::rms_norm"]  # `outer` has no self device time: no bar
    assert fig["data"][0]["y"] == [2355.0, 0.0] and fig["data"][1]["y"] == [403.0, 403.0]
    # each run's bars add up to its device time (the child once, not again inside its parent)
    assert sum(fig["data"][0]["y"]) * 1000 == data["runs"][0]["device_total_ns"]
    assert fig["layout"]["barmode"] == "group" and "Self device" in fig["layout"]["title"]["text"]


def test_compare_falls_back_to_self_cpu_time_without_a_device() -> None:
    data = compare((0, 0))
    assert compare_metric(data) == "cpu_total_ns"
    fig = make_compare_figure(data)
    assert fig["data"][0]["x"] == ["aten::mul", "aten::rms_norm", "outer"]  # by the largest self CPU in any run
    assert fig["data"][0]["y"] == [5.0, 0.0, 0.1]  # outer: its own 100 ns, not its 5.1 µs total
    assert "Self CPU" in fig["layout"]["title"]["text"]


@pytest.mark.parametrize(("max_ns", "unit"), [(0, "µs"), (2_355_000, "µs"), (10_000_000, "ms"), (9e9, "ms"),
                                              (1.5e10, "s")])
def test_time_unit(max_ns: float, unit: str) -> None:
    assert time_unit(max_ns)[0] == unit


def test_long_runs_plot_in_milliseconds() -> None:
    fig = make_top_ops_figure([op("a", 25_000_000, 1)], "device_total_ns")
    assert fig["data"][0]["x"] == [25.0] and "(ms)" in fig["layout"]["title"]["text"]


def test_top_ops_by_shape_keep_rows_apart() -> None:
    rows = [{**op("aten::mul", 0, 300), "input_shapes": "[[64, 512], [512]]"},
            {**op("aten::mul", 0, 100), "input_shapes": "[[64, 512], [64, 1]]"}]
    fig = make_top_ops_figure(rows, "self_cpu_ns")
    assert fig["data"][0]["y"] == ["aten::mul [[64, 512], [512]]", "aten::mul [[64, 512], [64, 1]]"]
