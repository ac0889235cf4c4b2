"""Cross-lane links of a build: flows (explicit, by correlation id, bound s/t/f steps) and, from
them, which framework op every runtime call and device execution belongs to. Pure array code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.analysis.nesting import nearest_ancestor_where
from explorer.ingest.columns import KINDS, NONE, SliceColumns, bind_points, lookup, pair_steps
from explorer.model.lanes import EXECUTE_FLOW_CATEGORIES, FWDBWD_FLOW_CATEGORIES, LANE_ORDER, FlowKind, Lane

MAX_CHAIN = 8  # op -> driver call -> runtime call -> schedule -> device: chains are short

Arrays3 = tuple[np.ndarray, np.ndarray, np.ndarray]


def flow_kind_index(cat: str) -> int:
    """Index into KINDS of a Chrome flow category (Kineto's launch flows across its versions)."""
    low = cat.lower()
    kind = (FlowKind.EXECUTE if low in EXECUTE_FLOW_CATEGORIES else FlowKind.FWDBWD
            if low in FWDBWD_FLOW_CATEGORIES else FlowKind.GENERIC)
    return KINDS.index(kind.value)


class _Sources:
    """Each slice's source file, looked up for the slices at hand only (`src[rows]`): the whole column would be
    one more int64 per slice held through the links step (51 MiB at 10M events)."""

    def __init__(self, thread: np.ndarray, thread_src: np.ndarray) -> None:
        self.thread, self.thread_src = thread, thread_src

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.thread_src[self.thread[rows]]
        return out


@dataclass
class FlowLinks:
    """The flows of a build, deduplicated, in flows-table order: (from, to, kind) per flow, and where each
    came from, which is what orders them: `cat` 0 an explicit link, 1 a correlation id, 2 a bound flow step
    pair, whose `code` is its flow's (ascending within cat 2; -1 otherwise)."""

    frm: np.ndarray
    to: np.ndarray
    kind: np.ndarray  # int8 index into KINDS
    cat: np.ndarray  # int8
    code: np.ndarray  # int64
    unbound: int  # flow steps whose end could not be bound to a slice
    lone: int = 0  # flow steps with no other step of their flow (an `s` without its `f`, or the reverse)


def build_flows(cols: SliceColumns, parent: np.ndarray, thread_src: np.ndarray, explicit: Arrays3,
                points: tuple[np.ndarray, ...]) -> FlowLinks:
    """Every flow, deduplicated (the first of equal (from, to) pairs kept), plus how many flow steps could
    not be bound.

    `thread_src` is each thread's source file (correlation ids are unique per file); `points` are flow steps
    as (code, kind, thread, ts, enclosing) columns."""
    src = _Sources(cols.thread, thread_src)
    froms, tos, kinds = [explicit[0]], [explicit[1]], [explicit[2]]
    codes = [np.full(len(explicit[0]), NONE, dtype=np.int64)]
    rt = np.nonzero((cols.corr >= 0) & (cols.lane == LANE_ORDER[Lane.RUNTIME]))[0]
    hw = np.nonzero((cols.corr >= 0) & (cols.lane == LANE_ORDER[Lane.HARDWARE]))[0]
    if len(rt) and len(hw):
        launcher = lookup(src[rt], cols.corr[rt], rt, src[hw], cols.corr[hw])
        ok = launcher >= 0
        froms.append(launcher[ok])
        tos.append(hw[ok])
        kinds.append(np.full(int(ok.sum()), KINDS.index(FlowKind.EXECUTE.value), dtype=np.int8))
        codes.append(np.full(int(ok.sum()), NONE, dtype=np.int64))
    cats = [np.full(len(c), i, dtype=np.int8) for i, c in enumerate(codes)]
    unbound = lone = 0
    code, kind, p_thread, p_ts, p_enc = points
    if len(code):
        bound = bind_points(cols.thread, cols.ts, cols.dur, parent, p_thread, p_ts, p_enc)
        a, b = pair_steps(code, p_ts)
        lone = len(code) - len(np.union1d(a, b))
        good = (bound[a] >= 0) & (bound[b] >= 0)
        unbound = int((~good).sum())
        froms.append(bound[a][good])
        tos.append(bound[b][good])
        kinds.append(kind[a][good])
        codes.append(code[a][good])
        cats.append(np.full(int(good.sum()), 2, dtype=np.int8))
    f, t, k = np.concatenate(froms), np.concatenate(tos), np.concatenate(kinds).astype(np.int8)
    c, cat = np.concatenate(codes), np.concatenate(cats)
    keep = (f >= 0) & (t >= 0) & (f != t)
    f, t, k, c, cat = f[keep], t[keep], k[keep], c[keep], cat[keep]
    _, first = np.unique(f * max(1, len(cols.ts)) + t, return_index=True)
    first.sort()
    return FlowLinks(f[first], t[first], k[first], cat[first], c[first], unbound, lone)


def attribute_ops(cols: SliceColumns, parent: np.ndarray, thread_src: np.ndarray, f_from: np.ndarray,
                  f_to: np.ndarray, f_kind: np.ndarray) -> np.ndarray:
    """op_id: for runtime calls the innermost enclosing op (else the op with the same External id);
    for device executions the op of the runtime call that launched them."""
    lane, is_op, ext, src = cols.lane, cols.is_op, cols.ext, _Sources(cols.thread, thread_src)
    op_id = np.full(len(lane), NONE, dtype=np.int64)
    if len(lane) == 0:
        return op_id
    runtime_lane, hw_lane = LANE_ORDER[Lane.RUNTIME], LANE_ORDER[Lane.HARDWARE]
    rt_mask = lane == runtime_lane
    op_id[rt_mask] = nearest_ancestor_where(parent, is_op)[rt_mask]

    op_idx = np.nonzero(is_op & (ext >= 0))[0]
    need = np.nonzero((op_id < 0) & (ext >= 0) & ((lane == runtime_lane) | (lane == hw_lane)))[0]
    if len(need) and len(op_idx):
        op_id[need] = lookup(src[op_idx], ext[op_idx], op_idx, src[need], ext[need])

    if len(f_from):
        k = np.asarray(KINDS, dtype=object)[f_kind]
        follow_launch_chains(op_id, is_op, f_from, f_to, k)
        ex = (k == FlowKind.EXECUTE.value) & (lane[f_to] == hw_lane)
        via = np.where(is_op[f_from[ex]], f_from[ex], op_id[f_from[ex]])
        got = via >= 0
        op_id[f_to[ex][got]] = via[got]
    return op_id


def follow_launch_chains(op_id: np.ndarray, is_op: np.ndarray, a: np.ndarray, b: np.ndarray,
                         k: np.ndarray) -> None:
    """Explicit launch/execute links hand their op down a chain (op -> runtime call on another thread
    -> runtime schedule -> device execution). Only slices without an op yet are set."""
    chain = (k == FlowKind.LAUNCH.value) | (k == FlowKind.EXECUTE.value)
    a, b = a[chain], b[chain]
    for _ in range(MAX_CHAIN):
        via = np.where(is_op[a], a, op_id[a])
        todo = (via >= 0) & (op_id[b] < 0) & ~is_op[b]
        if not todo.any():
            return
        op_id[b[todo]] = via[todo]
