"""Lanes and the declarative rule table that assigns every event category to one.

The table is data, not branches: each row is also a test row (tests/model/test_lanes.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Lane(StrEnum):
    FRAMEWORK = "framework"
    RUNTIME = "runtime"
    HARDWARE = "hardware"
    COUNTER = "counter"
    OTHER = "other"


LANE_ORDER: dict[str, int] = {lane.value: i for i, lane in enumerate(Lane)}


class FlowKind(StrEnum):
    LAUNCH = "launch"  # framework op -> runtime call
    EXECUTE = "execute"  # runtime call -> hardware execution
    FWDBWD = "fwdbwd"  # forward op -> backward op
    GENERIC = "generic"


@dataclass(frozen=True)
class LaneRule:
    """Category (exact, case-insensitive) -> lane; `is_op` marks events that `key_averages()` counts."""

    category: str
    lane: Lane
    is_op: bool = False
    device_time: bool = False  # a device execution whose duration counts as device time
    note: str = ""


LANE_RULES: tuple[LaneRule, ...] = (
    # framework: what the Python program asked for
    LaneRule("cpu_op", Lane.FRAMEWORK, is_op=True, note="Kineto ATen op"),
    LaneRule("operator", Lane.FRAMEWORK, is_op=True, note="2021-era Kineto op"),
    LaneRule("user_annotation", Lane.FRAMEWORK, is_op=True, note="record_function / ProfilerStep"),
    LaneRule("python_function", Lane.FRAMEWORK, is_op=True, note="with_stack Python frames (key_averages counts them)"),
    LaneRule("privateuse1_driver", Lane.FRAMEWORK, note="PrivateUse1 framework stream"),
    LaneRule("framework", Lane.FRAMEWORK, is_op=True, note="Neuron framework events"),
    LaneRule("trace", Lane.OTHER, note="Kineto trace span marker"),
    # runtime: host-side API calls that schedule device work
    LaneRule("cuda_runtime", Lane.RUNTIME),
    LaneRule("cuda_driver", Lane.RUNTIME),
    LaneRule("cuda_sync", Lane.RUNTIME),
    LaneRule("runtime", Lane.RUNTIME, note="2021-era Kineto runtime"),
    LaneRule("privateuse1_runtime", Lane.RUNTIME),
    LaneRule("mtia_runtime", Lane.RUNTIME),
    LaneRule("xpu_runtime", Lane.RUNTIME),
    LaneRule("xpu_driver", Lane.RUNTIME),
    LaneRule("neuron_rt", Lane.RUNTIME, note="Neuron runtime (nrta_execute_schedule, nrt_*)"),
    # hardware: what ran on the device
    LaneRule("kernel", Lane.HARDWARE, device_time=True),
    LaneRule("gpu_memcpy", Lane.HARDWARE, device_time=True),
    LaneRule("gpu_memset", Lane.HARDWARE, device_time=True),
    LaneRule("memcpy", Lane.HARDWARE, device_time=True, note="2021-era Kineto"),
    LaneRule("memset", Lane.HARDWARE, device_time=True, note="2021-era Kineto"),
    LaneRule("gpu_user_annotation", Lane.HARDWARE),
    LaneRule("mtia_ccp_events", Lane.HARDWARE, device_time=True),
    LaneRule("neuron_hw", Lane.HARDWARE, device_time=True, note="Neuron device (nc_exec_running, cc_running)"),
)

_BY_CATEGORY: dict[str, LaneRule] = {rule.category: rule for rule in LANE_RULES}
_DEFAULT = LaneRule("", Lane.OTHER)

# Lanes whose events are device executions with their own timeline per stream/core.
DEVICE_LANES = frozenset({Lane.HARDWARE})

# Flow categories that Kineto uses for launch -> kernel links, across its versions.
EXECUTE_FLOW_CATEGORIES = frozenset({"ac2g", "async", "async_gpu", "async_cpu_to_gpu"})
FWDBWD_FLOW_CATEGORIES = frozenset({"fwdbwd"})


def rule_for(category: str) -> LaneRule:
    """The rule for an event category; unknown categories fall in lane `other`."""
    return _BY_CATEGORY.get(category.lower(), _DEFAULT)
