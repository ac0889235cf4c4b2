"""A device dependency chain (explorer.analysis.device.chain) placed on the timeline: each node's device slice
(run-wide slice id and track) in the run's device tracks, its times shifted by its profile's alignment onto the
timeline's axis and made relative; the walk in time order with its links. No I/O, no formatting."""

from __future__ import annotations

import numpy as np

from explorer.analysis.device.chain import Chain, Node
from explorer.analysis.device.tracks import SLICE_TABLES, DeviceTimeline, device_slice_arrays
from explorer.model.device_timeline_shapes import ChainItemJson, ChainLinkJson, DeviceChainTimelineJson


class SliceFinder:
    """The device slice of an instruction (by `Instruction.id`) or DMA transfer (its earliest packet, by
    `DmaPacket.id`) of one profile: run-wide slice id and track."""

    def __init__(self, dt: DeviceTimeline, profile_id: str) -> None:
        self.dt, self.profile_id = dt, profile_id
        self.code = dt.profiles.index(profile_id)
        self.cols = device_slice_arrays(dt)

    def find(self, node: Node) -> tuple[int, int] | None:
        rows = self.dt.tables[self.profile_id].get(node.table)
        if rows is None or "id" not in rows.column_names or node.table not in SLICE_TABLES:
            return None
        mine = np.flatnonzero(rows.column("id").to_numpy(zero_copy_only=False) == node.id)
        cols = self.cols
        at = np.flatnonzero((cols["source_profile"] == self.code)
                            & (cols["source_table"] == SLICE_TABLES.index(node.table))
                            & np.isin(cols["source_row"], mine))
        if not len(at):
            return None
        pos = int(at[np.argmin(cols["ts"][at])])
        return self.dt.first_slice_id + pos, int(cols["track"][pos])


def build_chain_timeline(dt: DeviceTimeline, profile_id: str, chain: Chain, mode: str, node_ref: str,
                         origin_ns: int) -> DeviceChainTimelineJson:
    """The chain's walk (root or furthest step first, the asked node last) as timeline items and links; times
    are relative to `origin_ns` after the profile's shift (DeviceTimeline.alignments)."""
    shift = dt.alignments[profile_id]["shift_ns"] if profile_id in dt.alignments else 0
    finder = SliceFinder(dt, profile_id)
    nodes = [e.upstream for e in reversed(chain.steps)] + [chain.node]
    base = shift - origin_ns

    def item(n: Node, role: str) -> ChainItemJson:
        hit = finder.find(n)
        return {"table": n.table, "id": n.id, "slice_id": None if hit is None else hit[0],
                "track_id": None if hit is None else hit[1], "name": n.label, "lane": n.lane,
                "ts_rel_ns": n.start_ns + base, "dur_ns": n.end_ns - n.start_ns, "wait_start_ns": n.ready_ns + base,
                "run_ns": n.run_ns + base, "role": role}

    last = len(nodes) - 1
    is_root = chain.root is not None and (chain.root.table, chain.root.id) == (nodes[0].table, nodes[0].id)
    items = [item(n, "node" if i == last else "root" if i == 0 and is_root else "step") for i, n in enumerate(nodes)]
    links: list[ChainLinkJson] = [{"up": last - k - 1, "down": last - k, "kind": e.kind, "wait_ns": e.wait_ns}
                                  for k, e in reversed(list(enumerate(chain.steps)))]
    return {"profile": profile_id, "mode": mode, "node": node_ref, "items": items, "links": links,
            "root": 0 if is_root else None, "total_wait_ns": sum(e.wait_ns for e in chain.steps),
            "wait_by_lane": [{"lane": lane, "wait_ns": w} for lane, w in chain.wait_by_lane],
            "start_ns": min(i["wait_start_ns"] for i in items), "end_ns": max(i["ts_rel_ns"] + i["dur_ns"] for i in items),
            "shift_ns": shift}
