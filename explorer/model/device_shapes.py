"""JSON shapes of the device-profile API and pages (Neuron): the profile list, the Summary of a profile or
window, the roofline, the device page's sections and the comparison of two profiles. Every time is
relative ns (from the run's origin) and every duration ns; metrics keep the export's `Summary` names.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

STRICT = ConfigDict(extra="forbid")
Metrics = dict[str, int | float]


@with_config(STRICT)
class DeviceProfileLinks(TypedDict):
    page: str
    self: str
    summary: str
    roofline: str
    instructions_csv: str
    dma_csv: str


@with_config(STRICT)
class DeviceProfileJson(TypedDict):
    """A `device_profiles` row; start_ns/end_ns relative to the run's origin."""

    profile_id: str
    name: str
    instance_id: str
    process_id: int
    nc_id: int
    model_id: int
    session_id: int
    start_ns: int
    end_ns: int
    system_slice_id: int
    schema_version: str
    source: str
    tables: list[str]
    links: DeviceProfileLinks


@with_config(STRICT)
class DeviceProfileList(TypedDict):
    origin_ns: int
    profiles: list[DeviceProfileJson]


@with_config(STRICT)
class RecommendationJson(TypedDict):
    """A rule that fired, with the number that triggered it (`value`) and its `threshold`, both in `unit`."""

    key: str
    finding: str
    advice: str
    value: float
    threshold: float
    unit: str
    subject: str | None
    at_ns: int | None


@with_config(STRICT)
class DeviceSummaryJson(TypedDict):
    """The Summary metrics of [start_ns, end_ns) (relative); `from_export` names those taken as published."""

    profile: str
    start_ns: int
    end_ns: int
    core: int | None
    metrics: Metrics
    from_export: list[str]
    recommendations: list[RecommendationJson]


@with_config(STRICT)
class RooflinePointJson(TypedDict):
    kind: str
    label: str
    flops: int
    hbm_bytes: int
    time_ns: int
    achieved_flops_per_s: float | None
    intensity: float | None
    attainable_flops_per_s: float
    bound: str
    distance_to_roof: float | None
    mfu_inst_estimated_percent: float | None


@with_config(STRICT)
class RooflineJson(TypedDict):
    """The roofs (FLOP/s, bytes/s, FLOP/byte) and the points under them; `available` is False (no roofs,
    no points) when the export has no `Metadata` peaks."""

    profile: str
    available: bool
    max_ops: float | None
    hbm_ddr_bandwidth: float | None
    peak_flops_bandwidth_ratio: float | None
    points: list[RooflinePointJson]
    roofs_from: Literal["metadata", "summary"] | None  # summary: derived from the Summary's MFU and ridge


@with_config(STRICT)
class EngineRow(TypedDict):
    engine: str
    instruction_count: int | None  # None when the profile does not say (a Summary without the count)
    active_time_percent: float | None


@with_config(STRICT)
class OpcodeRowJson(TypedDict):
    engine: str
    opcode: str
    instruction_count: int
    instruction_time_ns: int
    active_time_ns: int
    active_time_percent: float | None


@with_config(STRICT)
class DmaQueueTypeJson(TypedDict):
    queue_type: str
    queue_count: int
    packet_count: int
    transfer_bytes: int
    average_bytes: float
    active_time_ns: int
    active_time_percent: float | None


@with_config(STRICT)
class DmaSizeJson(TypedDict):
    min_bytes: int
    max_bytes: int | None
    small: bool
    packet_count: int
    transfer_bytes: int
    packet_percent: float | None


@with_config(STRICT)
class DmaJson(TypedDict):
    """DMA by queue type and transfer size; `small_packet_count` packets are under `small_bytes`."""

    by_queue_type: list[DmaQueueTypeJson]
    by_size: list[DmaSizeJson]
    small_packet_count: int
    small_bytes: int


@with_config(STRICT)
class ThrottleJson(TypedDict):
    pcore_idx: int | None
    throttle_type: str
    throttle_active_time_ns: int
    throttle_active_time_percent: float | None
    max_achievable_util_with_throttling_percent: float | None
    max_throttling: float


@with_config(STRICT)
class HierarchyChild(TypedDict):
    """The instructions of one HLO op under a framework node (`hlo_name` "" when the rows have none)."""

    hlo_name: str
    instruction_count: int
    active_time_ns: int


@with_config(STRICT)
class HierarchyNode(TypedDict):
    """A `FrameworkNode`: `time_ns` the union of its `time_intervals`; `hfu` as published (a fraction of 1)."""

    node_name: str
    parent_name: str | None
    time_ns: int
    hfu: float | None
    hbm_read_bytes: int | None
    hbm_write_bytes: int | None
    instruction_count: int
    children: list[HierarchyChild]


@with_config(STRICT)
class TensorRow(TypedDict):
    """A `TensorInfo` row; `sbuf_reload_factor` is the published `load_to_sbuf_repeat_factor`, else
    `load_to_sbuf_total_size_bytes / size` (how many times the tensor was loaded into SBUF)."""

    variable_name: str | None
    type: str | None
    format: str | None
    shape: str | None
    size: int | None
    load_to_sbuf_total_size_bytes: int | None
    load_to_sbuf_dma_count: int | None
    sbuf_reload_factor: float | None


@with_config(STRICT)
class SbufRect(TypedDict):
    """An `SbufAllocation`: address range [start_address, end_address) of one partition over
    [start_ns, end_ns) (relative)."""

    partition: int | None
    tensor_name: str | None
    start_ns: int
    end_ns: int
    start_address: int
    end_address: int


@with_config(STRICT)
class SummaryField(TypedDict):
    """One field of the profile's stored `Summary` row, as stored; `published` is False for a key the
    published schema does not know (kept from a summary-text file)."""

    name: str
    value: int | float | str | bool | None
    published: bool


@with_config(STRICT)
class DeviceView(TypedDict):
    """GET /api/runs/{id}/device/{profile}: the device page's data. `window` is the Summary of the
    selected window (null without one); with one, `roofline` adds the window's point."""

    profile: DeviceProfileJson
    summary: DeviceSummaryJson
    window: DeviceSummaryJson | None
    engines: list[EngineRow]
    opcodes: list[OpcodeRowJson]
    dma: DmaJson
    layers: list[RooflinePointJson]
    throttle: list[ThrottleJson]
    errors: list[dict[str, Any]]
    roofline: RooflineJson
    hierarchy: list[HierarchyNode]
    tensors: list[TensorRow]
    sbuf: list[SbufRect]
    summary_fields: list[SummaryField]
    alignment: AlignmentJson


@with_config(STRICT)
class ProfileRef(TypedDict):
    run_id: str
    profile_id: str
    name: str


@with_config(STRICT)
class MetricDelta(TypedDict):
    """One metric of both profiles; `delta` = b - a (None when either is unknown)."""

    name: str
    a: int | float | None
    b: int | float | None
    delta: int | float | None


@with_config(STRICT)
class OpcodeDelta(TypedDict):
    engine: str
    opcode: str
    a_count: int
    b_count: int
    a_active_time_ns: int
    b_active_time_ns: int
    delta_active_time_ns: int


@with_config(STRICT)
class DeviceCompare(TypedDict):
    """GET /api/device/compare?a=run:profile&b=run:profile."""

    a: ProfileRef
    b: ProfileRef
    metrics: list[MetricDelta]
    opcodes: list[OpcodeDelta]
    engines: list[MetricDelta]


@with_config(STRICT)
class SideMetric(TypedDict):
    """One metric across the profiles; `deltas[i]` = values[i] - values[0] (None when either is not a number)."""

    name: str
    values: list[int | float | str | bool | None]
    deltas: list[int | float | None]


@with_config(STRICT)
class DeviceSideBySide(TypedDict):
    """GET /api/device/side-by-side?p=run:profile&p=...: the profiles, their engines and their Summary fields."""

    profiles: list[ProfileRef]
    summary_only: list[bool]
    engines: list[SideMetric]
    metrics: list[SideMetric]


@with_config(STRICT)
class ChainNodeJson(TypedDict):
    """An instruction or DMA transfer of a dependency chain; times relative to the run's origin. It waited
    `wait_ns` from `wait_start_ns` (its semaphore wait, or its DMA queue's idle time before it)."""

    table: str
    id: int
    lane: str
    label: str
    start_ns: int
    end_ns: int
    wait_start_ns: int
    wait_ns: int


@with_config(STRICT)
class ChainEdgeJson(TypedDict):
    """`downstream` waited `wait_ns` on `upstream` (a Flow row of `kind`)."""

    upstream: ChainNodeJson
    downstream: ChainNodeJson
    kind: str
    wait_ns: int


@with_config(STRICT)
class LaneWaitJson(TypedDict):
    lane: str
    wait_ns: int


@with_config(STRICT)
class DeviceChainJson(TypedDict):
    """GET /api/runs/{id}/device/{profile}/chain?node=&mode=: the node, what it waited on and what waited on it,
    the walk upstream (`mode` step: one step; trace: to the root cause), and the walk's waits per engine/queue."""

    profile: str
    mode: str
    node: ChainNodeJson
    upstream: list[ChainEdgeJson]
    downstream: list[ChainEdgeJson]
    steps: list[ChainEdgeJson]
    root: ChainNodeJson | None
    total_wait_ns: int
    wait_by_lane: list[LaneWaitJson]


@with_config(STRICT)
class AlignmentJson(TypedDict):
    """A device profile on the system time axis (explorer.analysis.device.align): `method` execution_slice (checked
    against its nc_exec_running slice) or none (not linked: its own clock, unchecked). `shift_ns` is added to the
    profile's times on the timeline (the host clock); [`shift_min_ns`, `shift_max_ns`] are the shifts the
    execution slice allows."""

    method: str
    within: bool | None
    start_offset_ns: int | None
    end_offset_ns: int | None
    uncertainty_ns: int | None
    shift_ns: int
    shift_min_ns: int | None
    shift_max_ns: int | None
