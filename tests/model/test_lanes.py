"""Each row of the lane rule table is a test row; unknown categories fall in lane `other`."""

from __future__ import annotations

import pytest

from explorer.model.lanes import LANE_RULES, Lane, rule_for

EXPECTED = {
    "cpu_op": Lane.FRAMEWORK, "user_annotation": Lane.FRAMEWORK, "python_function": Lane.FRAMEWORK,
    "privateuse1_driver": Lane.FRAMEWORK, "framework": Lane.FRAMEWORK, "Operator": Lane.FRAMEWORK,
    "cuda_runtime": Lane.RUNTIME, "cuda_driver": Lane.RUNTIME, "cuda_sync": Lane.RUNTIME,
    "privateuse1_runtime": Lane.RUNTIME, "mtia_runtime": Lane.RUNTIME, "xpu_runtime": Lane.RUNTIME,
    "neuron_rt": Lane.RUNTIME, "Runtime": Lane.RUNTIME,
    "kernel": Lane.HARDWARE, "gpu_memcpy": Lane.HARDWARE, "gpu_memset": Lane.HARDWARE,
    "gpu_user_annotation": Lane.HARDWARE, "mtia_ccp_events": Lane.HARDWARE, "neuron_hw": Lane.HARDWARE,
    "Kernel": Lane.HARDWARE, "Memcpy": Lane.HARDWARE, "Memset": Lane.HARDWARE,
    "ac2g": Lane.OTHER, "toplevel": Lane.OTHER, "": Lane.OTHER,
}


@pytest.mark.parametrize(("category", "lane"), sorted(EXPECTED.items()))
def test_category_lane(category: str, lane: Lane) -> None:
    assert rule_for(category).lane is lane


def test_every_rule_is_covered_and_annotations_are_not_device_time() -> None:
    assert {r.category for r in LANE_RULES} <= {c.lower() for c in EXPECTED} | {"trace", "memcpy", "memset", "runtime",
                                                                               "operator", "xpu_driver"}
    assert not rule_for("gpu_user_annotation").device_time
    assert rule_for("kernel").device_time and rule_for("neuron_hw").device_time
    assert rule_for("cpu_op").is_op and not rule_for("cuda_runtime").is_op
