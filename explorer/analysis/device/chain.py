"""Dependency chains of a Neuron device profile: from any instruction or DMA transfer, what it waited on (the
`Flow` rows that end at it) and what waited on it, one step up, or traced upstream to its root cause. Absolute int
ns on the profile's clock, no formatting. The wait rule: docs/architecture.md, "analysis/device/chain.py"."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from explorer.analysis.device.rows import (
    Tables,
    active_intervals,
    ints,
    normalise_engine,
    profile_span,
    strings,
    table,
    times,
)
from explorer.errors import BadRequest

NODE_TABLES = ("Instruction", "DmaPacket")
MAX_STEPS = 1000  # a trace longer than this stops (a cycle in Flow rows cannot loop forever)


@dataclass(frozen=True)
class Node:
    """One instruction or DMA transfer: where it ran (`lane`: engine or DMA queue), what (`label`), its span
    and its waiting interval [ready_ns, run_ns)."""

    table: str
    id: int
    lane: str
    label: str
    start_ns: int
    end_ns: int
    ready_ns: int
    run_ns: int

    @property
    def wait_ns(self) -> int:
        return self.run_ns - self.ready_ns


@dataclass(frozen=True)
class Edge:
    """`downstream` waited `wait_ns` on `upstream` (a `Flow` row `in_id` -> `out_id`, of `kind`)."""

    upstream: Node
    downstream: Node
    kind: str
    wait_ns: int


@dataclass(frozen=True)
class Chain:
    """A node, its upstream and downstream edges, the walk (`steps`, nearest first), where it ended (`root`:
    the node that waited on nothing, None for a one-step walk that did not reach it), and the walk's waits per
    engine or queue that waited (largest first)."""

    node: Node
    upstream: list[Edge]
    downstream: list[Edge]
    steps: list[Edge]
    root: Node | None
    wait_by_lane: list[tuple[str, int]]


def parse_node_ref(text: str) -> tuple[str, int]:
    """`Instruction:123` / `DmaPacket:7` (a bare number is an instruction) -> (table, id)."""
    name, sep, ident = text.rpartition(":")
    name = name if sep else "Instruction"
    if name not in NODE_TABLES or not ident.lstrip("-").isdigit():
        raise BadRequest(f"a chain node is Instruction:<id> or DmaPacket:<id>, not {text!r}")
    return name, int(ident)


class ChainIndex:
    """The profile's nodes and Flow rows as arrays, looked up by id (one pass per lookup over the columns)."""

    def __init__(self, tables: Tables) -> None:
        self.span_start = profile_span(tables).start_ns
        self.inst = table(tables, "Instruction")
        self.inst_ids = ints(self.inst, "id") if self.inst is not None else None
        self.dma = table(tables, "DmaPacket")
        self.dma_ids = ints(self.dma, "id") if self.dma is not None else None
        if self.dma is not None:
            self.dma_start, self.dma_end = times(self.dma)
            self.dma_queues = strings(self.dma, "queue_name")
        flow = table(tables, "Flow")
        empty = np.zeros(0, np.int64)
        self.flow_in = ints(flow, "in_id") if flow is not None else None
        self.flow_out = ints(flow, "out_id") if flow is not None else None
        self.flow_in_table = strings(flow, "in_table") if flow is not None else empty.astype(object)
        self.flow_out_table = strings(flow, "out_table") if flow is not None else empty.astype(object)
        self.flow_kind = strings(flow, "dependency_type") if flow is not None else empty.astype(object)
        self._nodes: dict[tuple[str, int], Node | None] = {}

    def node(self, name: str, ident: int) -> Node | None:
        key = (name, ident)
        if key not in self._nodes:
            self._nodes[key] = self._instruction(ident) if name == "Instruction" else self._transfer(ident)
        return self._nodes[key]

    def _instruction(self, ident: int) -> Node | None:
        rows, ids = self.inst, self.inst_ids
        if rows is None or ids is None:
            return None
        at = np.flatnonzero(ids == ident)
        if not len(at):
            return None
        row = rows.take(pa.array(at[:1]))
        start, end = times(row)
        run, _ = active_intervals(row)
        engine = strings(row, "engine")[0]
        lane = normalise_engine(engine) or str(engine or strings(row, "timeline_track")[0] or "")
        return Node("Instruction", ident, lane, str(strings(row, "opcode")[0] or ""), int(start[0]), int(end[0]),
                    int(start[0]), int(run[0]))

    def _transfer(self, ident: int) -> Node | None:
        ids = self.dma_ids
        if ids is None:
            return None
        mine = ids == ident
        if not mine.any():
            return None
        start, end, queues = self.dma_start, self.dma_end, self.dma_queues
        queue = str(queues[np.flatnonzero(mine)[0]] or "")
        first, last = int(start[mine].min()), int(end[mine].max())
        earlier = (queues == queue) & ~mine & (end <= first)
        ready = int(end[earlier].max()) if earlier.any() else min(self.span_start, first)
        return Node("DmaPacket", ident, queue, f"DMA {ident}", first, last, ready, first)

    def edges(self, node: Node, upstream: bool) -> list[Edge]:
        """The Flow rows ending at the node (upstream) or starting at it (downstream), nodes both present."""
        if self.flow_in is None or self.flow_out is None:
            return []
        mine_ids, mine_tables = (self.flow_out, self.flow_out_table) if upstream else (self.flow_in,
                                                                                          self.flow_in_table)
        other_ids, other_tables = (self.flow_in, self.flow_in_table) if upstream else (self.flow_out,
                                                                                        self.flow_out_table)
        out: list[Edge] = []
        for i in np.flatnonzero((mine_ids == node.id) & (mine_tables == node.table)).tolist():
            other = self.node(str(other_tables[i]), int(other_ids[i]))
            if other is None:
                continue
            up, down = (other, node) if upstream else (node, other)
            out.append(Edge(up, down, str(self.flow_kind[i] or "flow"), wait_on(down, up)))
        return sorted(out, key=lambda e: (-e.wait_ns, e.upstream.table, e.upstream.id, e.downstream.id))


def wait_on(down: Node, up: Node) -> int:
    """How long `down` waited on `up`: the part of its waiting interval before `up` completed."""
    return max(0, min(down.run_ns, up.end_ns) - down.ready_ns)


def critical(edges: list[Edge]) -> Edge | None:
    """The upstream edge that completed last (the one the node really waited for)."""
    if not edges:
        return None
    return max(edges, key=lambda e: (min(e.downstream.run_ns, e.upstream.end_ns), e.upstream.end_ns,
                                     -e.upstream.id))


def compute_chain(tables: Tables, name: str, ident: int, trace: bool) -> Chain:
    """The node's dependencies and the walk upstream: one step (`trace` False) or to the root cause."""
    index = ChainIndex(tables)
    node = index.node(name, ident)
    if node is None:
        raise BadRequest(f"the profile has no {name} with id {ident}")
    steps: list[Edge] = []
    seen = {(node.table, node.id)}
    current, root = node, None
    while len(steps) < MAX_STEPS:
        step = critical(index.edges(current, upstream=True))
        if step is None or step.wait_ns == 0:
            root = current
            break
        steps.append(step)
        current = step.upstream
        if (current.table, current.id) in seen:
            break
        seen.add((current.table, current.id))
        if not trace:
            break
    by_lane: dict[str, int] = {}
    for s in steps:
        by_lane[s.downstream.lane] = by_lane.get(s.downstream.lane, 0) + s.wait_ns
    return Chain(node, index.edges(node, upstream=True), index.edges(node, upstream=False), steps, root,
                 sorted(by_lane.items(), key=lambda kv: (-kv[1], kv[0])))
