"""The roofline and SBUF figures: roofs from the numbers given (the compute roof meets the bandwidth roof at
the ridge), points where the roofline data puts them, trace names made inert, no figure without peaks."""

from __future__ import annotations

from typing import Any

import pytest

from explorer.views.charts import make_roofline_figure, make_sbuf_figure

HOSTILE = "<img src=x onerror=alert(1)>"


def point(kind: str, label: str, achieved: float, intensity: float | None, bound: str) -> dict[str, Any]:
    return {"kind": kind, "label": label, "flops": 1, "hbm_bytes": 1, "time_ns": 1, "achieved_flops_per_s": achieved,
            "intensity": intensity, "attainable_flops_per_s": 2 * achieved, "bound": bound, "distance_to_roof": 2.0,
            "mfu_inst_estimated_percent": 1.0}


ROOFLINE = {"profile": "p", "available": True, "max_ops": 1e14, "hbm_ddr_bandwidth": 4e11,
            "peak_flops_bandwidth_ratio": 250.0,
            "points": [point("profile", "profile", 1e12, 10.0, "memory"), point("layer", HOSTILE, 5e13, 1000.0, "compute"),
                       point("layer", "idle", 0.0, None, "compute")]}


def test_roofs_meet_at_the_ridge() -> None:
    fig = make_roofline_figure(ROOFLINE)
    roof = next(t for t in fig["data"] if t["name"] == "roof")
    assert roof["x"][1] == 250.0 and roof["y"][1] == pytest.approx(1e14) == roof["y"][2]
    assert roof["y"][0] == pytest.approx(roof["x"][0] * 4e11)  # bandwidth roof: intensity x bandwidth
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"


def test_points_and_their_hover() -> None:
    fig = make_roofline_figure(ROOFLINE)
    traces = {t["name"]: t for t in fig["data"]}
    assert traces["profile"]["x"] == [10.0] and traces["profile"]["y"] == [1e12]
    assert traces["layer"]["y"] == [5e13]  # a point with nothing achieved has no place on a log axis
    assert "memory-bound, 2.00× below the roof" in traces["profile"]["hovertext"][0]
    layer_text = traces["layer"]["hovertext"][0] + traces["layer"]["text"][0]
    assert HOSTILE not in layer_text and "&lt;img src=x onerror=alert(1)&gt;" in traces["layer"]["hovertext"][0]


def test_no_peaks_no_roofline() -> None:
    assert make_roofline_figure({"available": False, "points": []})["data"] == []


def test_sbuf_rectangles() -> None:
    rects = [{"partition": 0, "tensor_name": HOSTILE, "start_ns": 1000, "end_ns": 3000, "start_address": 0,
              "end_address": 64}]
    fig = make_sbuf_figure(rects)
    shape = fig["layout"]["shapes"][0]
    assert (shape["x0"], shape["x1"], shape["y0"], shape["y1"]) == (1.0, 3.0, 0, 64)  # µs
    assert HOSTILE not in fig["data"][0]["hovertext"][0]
