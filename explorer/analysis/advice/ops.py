"""The framework ops the fusion rules read: each `cpu_op` with its thread, parent, start, time and input
shapes, in start order per (thread, parent), so siblings that ran one after another sit side by side. An op's
time is the device time its subtree launched on a run with device time, else its CPU duration."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.model.lanes import Lane

I64 = np.int64
OP_CATEGORIES = ("cpu_op", "Operator")  # Kineto's op category, and the 2021 traces' name for it
ELEMENTWISE = frozenset({
    "mul", "add", "sub", "div", "pow", "rsqrt", "sqrt", "exp", "log", "tanh", "sigmoid", "neg", "abs", "mean",
    "sum", "var", "var_mean", "std", "softmax", "_softmax", "log_softmax", "_log_softmax", "gelu", "silu", "relu",
    "clamp", "clamp_min", "maximum", "minimum", "where", "square", "reciprocal", "erf", "rsub", "masked_fill",
    "amax", "addcmul", "addcdiv", "lerp", "dropout", "native_dropout", "mish", "hardswish", "leaky_relu", "exp2",
})


@dataclass(frozen=True)
class OpSeq:
    """Ops sorted by (track, parent, start); `names`/`parent_names` are texts, the rest int64 columns."""

    slice_id: np.ndarray
    track: np.ndarray
    parent: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    time: np.ndarray
    names: list[str]
    parent_names: list[str]
    shapes: list[str]
    device_basis: bool  # times are device time (the run has device executions)

    def __len__(self) -> int:
        return len(self.slice_id)

    def same_group(self, i: int, j: int) -> bool:
        return bool(self.track[i] == self.track[j] and self.parent[i] == self.parent[j])


def subtree_device_ns(slices: pa.Table) -> np.ndarray:
    """Per slice (by position): the device time of the executions whose op is it or one below it."""
    n = slices.num_rows
    total = np.zeros(n, I64)
    dev = np.asarray(pc.fill_null(slices.column("device_time"), False).to_numpy(zero_copy_only=False), bool)
    op = slices.column("op_id").to_numpy().astype(I64)[dev]
    dur = slices.column("dur_ns").to_numpy().astype(I64)[dev]
    ok = (op >= 0) & (op < n)
    own = np.zeros(n, I64)
    np.add.at(own, op[ok], dur[ok])
    parent = slices.column("parent_id").to_numpy().astype(I64)
    cur = np.flatnonzero(own)
    amount = own[cur]
    for _ in range(256):  # nesting depth bound: a cycle in bad input cannot loop forever
        if not len(cur):
            break
        np.add.at(total, cur, amount)
        cur = parent[cur]
        keep = (cur >= 0) & (cur < n)
        cur, amount = cur[keep], amount[keep]
    return total


def build_op_seq(slices: pa.Table, shapes: dict[int, str]) -> OpSeq:
    """The ops of `slices` (a run's cached slice columns, slice_id == position) with their `shapes` (Kineto's
    Input Dims text by slice id; absent: unknown)."""
    lane = slices.column("lane")
    mask = pc.and_(pc.equal(lane, Lane.FRAMEWORK), pc.is_in(slices.column("cat"), pa.array(OP_CATEGORIES)))
    idx = np.flatnonzero(np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), bool))
    device = subtree_device_ns(slices)
    has_device = bool(np.asarray(pc.fill_null(slices.column("device_time"), False)
                                 .to_numpy(zero_copy_only=False), bool).any())
    track = slices.column("track_id").to_numpy().astype(I64)[idx]
    parent = slices.column("parent_id").to_numpy().astype(I64)[idx]
    ts = slices.column("ts_ns").to_numpy().astype(I64)[idx]
    order = np.lexsort((ts, parent, track))
    idx, track, parent, ts = idx[order], track[order], parent[order], ts[order]
    dur = slices.column("dur_ns").to_numpy().astype(I64)[idx]
    names_all = slices.column("name")
    names = [str(v or "") for v in names_all.take(pa.array(idx, pa.int64())).to_pylist()]
    ok_parent = (parent >= 0) & (parent < slices.num_rows)
    pnames = names_all.take(pa.array(np.where(ok_parent, parent, 0), pa.int64())).to_pylist()
    parent_names = [str(p or "") if good else "" for p, good in zip(pnames, ok_parent.tolist(), strict=True)]
    sid = slices.column("slice_id").to_numpy().astype(I64)[idx]
    return OpSeq(sid, track, parent, ts, dur, device[idx] if has_device else dur, names, parent_names,
                 [shapes.get(int(s), "") for s in sid.tolist()], has_device)


@functools.lru_cache(maxsize=4096)
def _shapes(text: str) -> tuple[tuple[int, ...], ...]:
    """Kineto's Input Dims text parsed once per distinct text (a trace repeats a few shapes many times)."""
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(tuple(int(d) for d in s) for s in value
                 if isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in s))


def parse_shapes(text: str) -> list[list[int]]:
    """Kineto's Input Dims (`[[64, 2048], [], [2048]]`) as lists of ints; anything else is no shapes."""
    return [list(s) for s in _shapes(text)]


@functools.lru_cache(maxsize=4096)
def _largest(text: str) -> tuple[int, ...]:
    dims = [s for s in _shapes(text) if s]
    return max(dims, key=lambda s: (math.prod(s), len(s))) if dims else ()


def rows_key(text: str) -> tuple[int, ...] | None:
    """The rows an elementwise op works on: the leading dims (all but the last) of its largest input, so
    `x * x` on [64, 2048] and `mean + eps` on [64, 1] share the key (64,). None without a shaped input."""
    largest = _largest(text)
    return largest[:-1] if largest else None


def largest_shape(text: str) -> list[int]:
    return list(_largest(text))


@functools.lru_cache(maxsize=4096)
def base_name(name: str) -> str:
    """`aten::mul_` -> `mul`: the op's name without namespace and in-place suffix."""
    short = name.split("::", 1)[1] if name.startswith("aten::") else ""
    return short[:-1] if short.endswith("_") and not short.endswith("__") else short


def nearest_ancestor(parent: np.ndarray, start: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """For each start slice, its nearest proper ancestor for which `hit` is true (-1 none)."""
    n = len(parent)
    out = np.full(len(start), -1, I64)
    if not n:
        return out
    ok = (start >= 0) & (start < n)
    cur = np.where(ok, parent[np.where(ok, start, 0)], -1)
    for _ in range(256):
        live = (out < 0) & (cur >= 0) & (cur < n)
        if not live.any():
            break
        found = live & hit[np.where(live, cur, 0)]
        out[found] = cur[found]
        cur = np.where(live & ~found, parent[np.where(live, cur, 0)], -1)
    return out
