"""Response shapes of the timeline's device routes: each device profile's alignment onto the host clock, and a
device dependency chain as timeline items (slice ids, relative ns on the timeline's axis)."""

from __future__ import annotations

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from explorer.model.device_shapes import AlignmentJson, LaneWaitJson

STRICT = ConfigDict(extra="forbid")


@with_config(STRICT)
class ProfileAlignmentJson(TypedDict):
    """One device profile: its id, name, NeuronCore, span on the timeline (relative ns, shifted) and alignment."""

    profile_id: str
    name: str
    nc_id: int
    start_ns: int
    end_ns: int
    system_slice_id: int
    alignment: AlignmentJson


@with_config(STRICT)
class DeviceAlignmentsJson(TypedDict):
    """GET /api/runs/{id}/timeline/device-alignment."""

    profiles: list[ProfileAlignmentJson]


@with_config(STRICT)
class ChainItemJson(TypedDict):
    """A chain node on the timeline: its device slice (`slice_id`, `track_id`; None when it has none), its span
    and waiting interval [wait_start_ns, run_ns) (relative ns on the timeline), `role` root / step / node (the
    one asked about)."""

    table: str
    id: int
    slice_id: int | None
    track_id: int | None
    name: str
    lane: str
    ts_rel_ns: int
    dur_ns: int
    wait_start_ns: int
    run_ns: int
    role: str


@with_config(STRICT)
class ChainLinkJson(TypedDict):
    """Item `down` (an index into items) waited `wait_ns` on item `up` (a `Flow` dependency of `kind`)."""

    up: int
    down: int
    kind: str
    wait_ns: int


@with_config(STRICT)
class DeviceChainTimelineJson(TypedDict):
    """GET /api/runs/{id}/timeline/device-chain?profile=&node=&mode=: the walk upstream in time order (the root
    or furthest step first, the node last), its links, its total wait and waits per engine/queue, its span."""

    profile: str
    mode: str
    node: str
    items: list[ChainItemJson]
    links: list[ChainLinkJson]
    root: int | None
    total_wait_ns: int
    wait_by_lane: list[LaneWaitJson]
    start_ns: int
    end_ns: int
    shift_ns: int
