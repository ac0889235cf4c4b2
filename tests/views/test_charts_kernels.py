"""Kernel figures: hostile names are inert, bars are numbered (long C++ prefixes never merge), axes in
the unit time_unit() picks, one bar per category with its device share."""

from __future__ import annotations

from typing import Any

from explorer.views.charts import make_kernel_category_figure, make_top_kernels_figure


def row(name: str, total_ns: int, category: str = "compute") -> dict[str, Any]:
    return {"name": name, "total_ns": total_ns, "calls": 2, "category": category}


def test_top_kernels_figure() -> None:
    same_prefix = "void at::native::vectorized_elementwise_kernel<4, at::native::" + "X" * 40
    rows = [row(same_prefix + "A", 30_000_000), row(same_prefix + "B", 20_000_000),
            row("<script>alert(1)</script>", 5_000_000, "communication"), row("idle", 0)]
    fig = make_top_kernels_figure(rows)
    bars = fig["data"][0]
    assert len(bars["y"]) == 3 and len(set(bars["y"])) == 3
    assert bars["y"][0].startswith("1. at::native::") and bars["y"][2] == "3. &lt;script&gt;alert(1)&lt;/script&gt;"
    assert bars["x"] == [30.0, 20.0, 5.0] and "(ms)" in fig["layout"]["title"]["text"]
    assert bars["customdata"][2][0] == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert bars["marker"]["color"][2] != bars["marker"]["color"][0]


def test_kernel_category_figure() -> None:
    cats = [{"category": "compute", "calls": 5, "total_ns": 3_000, "device_pct": 75.0},
            {"category": "memset", "calls": 1, "total_ns": 1_000, "device_pct": 25.0},
            {"category": "other", "calls": 0, "total_ns": 0, "device_pct": 0.0}]
    bars = make_kernel_category_figure(cats)["data"][0]
    assert bars["y"] == ["compute", "memset"] and bars["x"] == [3.0, 1.0] and bars["text"] == ["75.0 %", "25.0 %"]
    assert make_kernel_category_figure([])["data"][0]["y"] == []
