"""What finish() derives from each source's slices alone: nesting (parents, sub-rows, depth), flows and the op
each runtime call and device execution belongs to. None of it crosses a source (threads, correlation ids and
flow ids are per file), so a part job computes it beside its parse (explorer.ingest.parts) and the merged run's
finish only joins the parts' results, in the order one builder would have produced them. A run with anything
else in it (a file parsed in the ingest's process, links added across files) is linked whole, as before.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from explorer.analysis.nesting import compute_nesting, count_same_lane_ancestors
from explorer.ingest.columns import NONE, ROW_FLOW_CODES, SliceColumns
from explorer.ingest.links import FlowLinks, attribute_ops, build_flows
from explorer.ingest.tracks import track_codes
from explorer.model.split import TimeSplit

Arrays3 = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass
class Linked:
    """Per raw slice: parent and op (raw indices, -1 none), sub-row and depth on its track; the flows."""

    parent: np.ndarray
    sub_row: np.ndarray  # int8 (nesting.MAX_SUB_ROWS)
    depth: np.ndarray  # int32
    op_id: np.ndarray
    flows: FlowLinks
    displaced: int  # slices put on a sub-row
    # raw indices by track, then time (longer first), then raw index: the slices table's order once the tracks
    # are numbered (each track's slices together, in this order); None when not worked out yet
    by_track: np.ndarray | None = None


def link_slices(cols: SliceColumns, thread_src: np.ndarray, explicit: Arrays3, points: tuple[np.ndarray, ...],
                split: TimeSplit | None = None) -> Linked:
    """Nest, link and attribute the slices of `cols` (threads index `thread_src`, their sources)."""
    def step(name: str) -> AbstractContextManager[None]:
        return split.step(name) if split is not None else nullcontext()

    with step("nesting"):
        nest = compute_nesting(cols.thread, cols.lane, cols.ts, cols.dur)
        depth = count_same_lane_ancestors(nest.parent, cols.lane)
    with step("links"):
        flows = build_flows(cols, nest.parent, thread_src, explicit, points)
        op_id = attribute_ops(cols, nest.parent, thread_src, flows.frm, flows.to, flows.kind)
    return Linked(nest.parent, nest.sub_row, depth, op_id, flows, nest.displaced_rows)


# ---- a part's result, and the merge of several --------------------------------------------------------

def linked_tables(linked: Linked, cols: SliceColumns, coded: int) -> tuple[pa.Table, pa.Table, dict[str, int]]:
    """A part's Linked as (per-slice table, flows table, counts), with its slices' order by track (Linked.
    by_track) worked out here, where it costs the part's process. `coded` is how many row-wise flow codes
    the part's builder had handed out before it was linked: a step's code class (0 bulk, 1 coded while
    parsing, 2 coded by the link) is what orders it among the other parts' steps."""
    code = linked.flows.code
    cls = np.where(code < ROW_FLOW_CODES, 0, np.where(code < ROW_FLOW_CODES + coded, 1, 2)).astype(np.int8)
    codes = track_codes(cols.thread, cols.lane, linked.sub_row)
    by_track = np.lexsort((-cols.dur, cols.ts, codes)) if len(codes) else np.zeros(0, np.int64)
    tracks, track = np.unique(codes, return_inverse=True)
    slices = pa.table({"parent": linked.parent, "sub_row": linked.sub_row.astype(np.int32),
                       "depth": linked.depth.astype(np.int32), "op_id": linked.op_id, "by_track": by_track,
                       "track": track.astype(np.int32)})
    f = linked.flows
    flows = pa.table({"from": f.frm, "to": f.to, "kind": f.kind, "cat": f.cat, "cls": cls, "code": code})
    return slices, flows, {"displaced": linked.displaced, "unbound": f.unbound, "lone": f.lone,
                            "tracks": tracks.tolist()}


@dataclass
class _Piece:
    row0: int
    thread0: int
    slices: pa.Table
    flows: pa.Table
    counts: dict[str, int]
    tracks: np.ndarray  # the part's track codes (tracks.track_codes), sorted, with its own thread indices


@dataclass
class LinkedParts:
    """The parts' Linked results as merged (raw indices from row0 on), and the builder's sizes after the
    last one: finish() uses them only when they cover every slice and nothing was added since."""

    pieces: list[_Piece] = field(default_factory=list)
    marks: tuple[int, ...] | None = None

    def add(self, row0: int, thread0: int, slices: pa.Table, flows: pa.Table, counts: dict[str, Any]) -> None:
        tracks = np.asarray(counts["tracks"], dtype=np.int64)
        self.pieces.append(_Piece(row0, thread0, slices, flows, {k: int(counts.get(k, 0)) for k in ("displaced", "unbound", "lone")},
                                  tracks))

    def tracks(self) -> tuple[np.ndarray, np.ndarray]:
        """np.unique(track_codes(...), return_inverse=True) over every piece's slices, from the pieces' own:
        their threads follow one another, so their codes, moved to the run's thread indices, are in order."""
        codes, inverse, seen = [], [], 0
        zero = np.zeros(1, dtype=np.int64)
        for p in self.pieces:
            codes.append(p.tracks + track_codes(zero + p.thread0, zero, zero)[0])
            inverse.append(p.slices.column("track").to_numpy().astype(np.int64) + seen)
            seen += len(p.tracks)
        return np.concatenate(codes), np.concatenate(inverse)

    def covers(self, rows: int, marks: tuple[int, ...]) -> bool:
        if not self.pieces or marks != self.marks:
            return False
        at = 0
        for piece in self.pieces:
            if piece.row0 != at:
                return False
            at += piece.slices.num_rows
        return at == rows

    def joined(self) -> Linked:
        """One Linked over all pieces, as link_slices over their slices together gives it."""
        def col(name: str, dtype: type, shift: bool = False) -> np.ndarray:
            parts = [_shifted(p.slices.column(name).to_numpy(), p.row0 if shift else 0) for p in self.pieces]
            return np.concatenate(parts).astype(dtype, copy=False)

        return Linked(parent=col("parent", np.int64, True), sub_row=col("sub_row", np.int8),
                      depth=col("depth", np.int32), op_id=col("op_id", np.int64, True), flows=self._flows(),
                      displaced=sum(p.counts["displaced"] for p in self.pieces),
                      by_track=col("by_track", np.int64, True))

    def _flows(self) -> FlowLinks:
        """The parts' flows in one builder's order: explicit links, then correlation flows, part by part; then
        flow step pairs by their flow's code, which one builder hands out by class (bulk blocks, coded while
        parsing, coded at the link), within a class part by part, within a part as the part did."""
        cols: dict[str, list[np.ndarray]] = {k: [] for k in ("from", "to", "kind", "cat", "cls", "code", "part",
                                                              "pos")}
        for i, p in enumerate(self.pieces):
            for name in ("from", "to", "kind", "cat", "cls", "code"):
                cols[name].append(_shifted(p.flows.column(name).to_numpy(), p.row0 if name in ("from", "to") else 0))
            cols["part"].append(np.full(p.flows.num_rows, i, dtype=np.int64))
            cols["pos"].append(np.arange(p.flows.num_rows, dtype=np.int64))
        a = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in cols.items()}
        steps = a["cat"] == 2
        order = np.lexsort((a["pos"], np.where(steps, a["code"], 0), a["part"], np.where(steps, a["cls"], 0),
                            a["cat"]))
        return FlowLinks(a["from"][order].astype(np.int64), a["to"][order].astype(np.int64),
                         a["kind"][order].astype(np.int8), a["cat"][order].astype(np.int8),
                         a["code"][order].astype(np.int64), sum(p.counts["unbound"] for p in self.pieces),
                         sum(p.counts["lone"] for p in self.pieces))


def _shifted(values: np.ndarray, by: int) -> np.ndarray:
    """Raw indices moved by `by`, NONE kept."""
    return np.where(values >= 0, values + by, NONE) if by else values


def track_order(by_track: np.ndarray | None, raw_track: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Raw slice indices in the slices table's order: by track id, then time, longer first, then raw index.
    From parts' orders (Linked.by_track: each track's slices in order already) a stable sort by track id
    moves whole runs; without, one lexsort over the three keys."""
    if not len(ts):
        return np.zeros(0, dtype=np.int64)
    if by_track is None:
        return np.lexsort((-dur, ts, raw_track))
    key = raw_track[by_track]
    if len(raw_track) and int(raw_track.max()) < 2**16:
        key = key.astype(np.uint16)  # numpy sorts 16-bit keys stably by radix
    ordered: np.ndarray = by_track[np.argsort(key, kind="stable")]
    return ordered
