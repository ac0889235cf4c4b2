"""The op table: `torch.profiler`'s `key_averages()` computed from a run's slices.

Same tree rules as torch: ops and runtime calls of one thread nest by time containment; self CPU
is an op's time minus its children's; device time is the device executions an op launched, self
(directly) or total (with its children's). Names torch hides from its table are hidden here too.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.nesting import nearest_ancestor_where
from explorer.model.tables import OP_STATS

# torch.autograd.profiler_util._filter_name: utility ops that key_averages() leaves out
HIDDEN_OP_NAMES = frozenset({
    "[memory]",
    "[OutOfMemory]",
    "profiler::_record_function_enter",
    "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
    "aten::is_leaf",
    "aten::output_nr",
    "aten::_version",
})
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")


def op_key_name(name: str) -> str:
    """The row name key_averages() uses (ProfilerStep#3 -> ProfilerStep*)."""
    return "ProfilerStep*" if _PROFILER_STEP.match(name) else name


def compute_op_stats(slices: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(per name, per name and input shapes) op tables, sorted by device time then CPU time."""
    if slices.num_rows == 0:
        return OP_STATS.empty_table(), OP_STATS.empty_table()
    name = slices.column("name").to_numpy(zero_copy_only=False)
    lane = slices.column("lane").to_numpy(zero_copy_only=False)
    is_op = slices.column("is_op").to_numpy(zero_copy_only=False)
    hidden = np.isin(name, list(HIDDEN_OP_NAMES))
    is_op = is_op & ~hidden
    node = is_op | ((lane == "runtime") & ~hidden)
    parent = slices.column("parent_id").to_numpy()
    dur = slices.column("dur_ns").to_numpy()
    tparent = nearest_ancestor_where(parent, node)

    self_dev = np.zeros(len(dur), dtype=np.int64)
    op_id = slices.column("op_id").to_numpy()
    dev = np.nonzero(slices.column("device_time").to_numpy(zero_copy_only=False) & (op_id >= 0))[0]
    np.add.at(self_dev, op_id[dev], dur[dev])
    removed = _remove_duplicate_children(name, node, tparent, self_dev)
    node &= ~removed
    is_op &= ~removed

    self_cpu = np.where(node, dur, 0).astype(np.int64)
    child = np.nonzero(node & (tparent >= 0))[0]
    np.subtract.at(self_cpu, tparent[child], dur[child])
    total_dev = _roll_up(self_dev, tparent, node)
    device_all = int(dur[slices.column("device_time").to_numpy(zero_copy_only=False)].sum())

    ops = np.nonzero(is_op)[0]
    keys = pc.replace_substring_regex(slices.column("name").take(pa.array(ops)), r"^ProfilerStep#\d+$",
                                      "ProfilerStep*").to_numpy(zero_copy_only=False)
    shapes = slices.column("shapes").to_numpy(zero_copy_only=False)[ops]
    by_name = _group(keys, np.full(len(ops), "", dtype=object), dur[ops], self_cpu[ops],
                     total_dev[ops], self_dev[ops], device_all)
    shapes = np.where(shapes == "", "[]", shapes)
    by_shape = _group(keys, shapes, dur[ops], self_cpu[ops], total_dev[ops], self_dev[ops], device_all)
    return by_name, by_shape


def _remove_duplicate_children(name: np.ndarray, node: np.ndarray, tparent: np.ndarray,
                               self_dev: np.ndarray) -> np.ndarray:
    """torch's EventList._remove_dup_nodes: an op that is the only child of an op with the same name
    (e.g. aten::div_ calling its other overload) is folded into its parent: its children move up and
    its device executions become the parent's. Updates tparent and self_dev in place."""
    removed = np.zeros(len(node), dtype=bool)
    while True:
        live = np.nonzero(node & ~removed & (tparent >= 0))[0]
        if not len(live):
            return removed
        children = np.bincount(tparent[live], minlength=len(node))
        p = tparent[live]
        dup = live[(children[p] == 1) & (name[live] == name[p])]
        dup = dup[~np.isin(tparent[dup], dup)]  # fold top-down, one level per round
        if not len(dup):
            return removed
        removed[dup] = True
        self_dev[tparent[dup]] = self_dev[dup]
        self_dev[dup] = 0
        lifted = np.nonzero(np.isin(tparent, dup))[0]
        up = np.full(len(node), -1, dtype=np.int64)
        up[dup] = tparent[dup]
        tparent[lifted] = up[tparent[lifted]]


def _roll_up(self_dev: np.ndarray, tparent: np.ndarray, node: np.ndarray) -> np.ndarray:
    """Total = self + children's totals, summed from the deepest level up."""
    total = self_dev.copy()
    level = np.zeros(len(tparent), dtype=np.int64)
    cur = tparent.copy()
    active = np.nonzero(node & (cur >= 0))[0]
    while len(active):
        level[active] += 1
        cur[active] = tparent[cur[active]]
        active = active[cur[active] >= 0]
    for d in range(int(level.max(initial=0)), 0, -1):
        at = np.nonzero(node & (level == d))[0]
        np.add.at(total, tparent[at], total[at])
    return total


def _group(keys: np.ndarray, shapes: np.ndarray, dur: np.ndarray, self_cpu: np.ndarray,
           total_dev: np.ndarray, self_dev: np.ndarray, device_all: int) -> pa.Table:
    table = pa.table({
        "name": pa.array(keys, pa.string()),
        "input_shapes": pa.array(shapes, pa.string()),
        "dur": dur, "self_cpu": self_cpu, "total_dev": total_dev, "self_dev": self_dev,
    })
    g = table.group_by(["name", "input_shapes"], use_threads=False).aggregate([
        ("dur", "count"), ("dur", "sum"), ("self_cpu", "sum"), ("total_dev", "sum"), ("self_dev", "sum"),
    ])
    calls = g.column("dur_count")
    cpu_total = g.column("dur_sum")
    self_dev_sum = g.column("self_dev_sum")
    pct = (pc.multiply(pc.divide(pc.cast(self_dev_sum, pa.float64()), float(device_all)), 100.0)
           if device_all else pa.array(np.zeros(g.num_rows)))
    out = pa.table({
        "name": g.column("name"),
        "input_shapes": g.column("input_shapes"),
        "calls": calls,
        "cpu_total_ns": cpu_total,
        "self_cpu_ns": g.column("self_cpu_sum"),
        "cpu_avg_ns": pc.cast(pc.divide(pc.cast(cpu_total, pa.float64()), pc.cast(calls, pa.float64())),
                              pa.int64(), safe=False),
        "device_total_ns": g.column("total_dev_sum"),
        "self_device_ns": self_dev_sum,
        "device_pct": pct,
    }, schema=OP_STATS)
    return out.sort_by([("device_total_ns", "descending"), ("cpu_total_ns", "descending"), ("name", "ascending")])


def device_time_summary(slices: pa.Table) -> dict[str, int]:
    """Total device execution time, and how much of it is attributed to a framework op."""
    if slices.num_rows == 0:
        return {"device_total_ns": 0, "attributed_ns": 0, "unattributed_ns": 0}
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False)
    dur = slices.column("dur_ns").to_numpy()
    op_id = slices.column("op_id").to_numpy()
    total = int(dur[devtime].sum())
    attributed = int(dur[devtime & (op_id >= 0)].sum())
    return {"device_total_ns": total, "attributed_ns": attributed, "unattributed_ns": total - attributed}
