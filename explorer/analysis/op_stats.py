"""The op table: `torch.profiler`'s `key_averages()` computed from a run's slices, by torch's tree rules, and
where it differs, on purpose (recursive frames, with_stack frames, launches outside any op), documented in
docs/architecture.md, "analysis/op_stats.py". In model because ingest, store and analysis all use it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.nesting import nearest_ancestor_where
from explorer.model.lanes import FlowKind, Lane
from explorer.model.tables import OP_STATS, OP_STATS_BY_MODULE

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
PYTHON_CATEGORY = "python_function"  # with_stack frames: the `python` kind; every other op is an `operator`
ANNOTATION_CATEGORY = "user_annotation"  # record_function ranges: a frame's launches do not roll up to them
RUNTIME_KIND = "runtime"  # rows of runtime calls that launched device work with no op or frame around them
MODULE_FRAME_PREFIX = "nn.Module: "  # torch's python tracer names with_modules frames "nn.Module: Linear_0"


def op_key_name(name: str) -> str:
    """The row name key_averages() uses (ProfilerStep#3 -> ProfilerStep*)."""
    return "ProfilerStep*" if _PROFILER_STEP.match(name) else name


@dataclass
class OpEvents:
    """Every op event key_averages() counts (`ops`: slice positions) with its times, and the op tree
    (`tparent`, over ops and runtime calls) that device time rolls up through. Texts are codes into a list of
    values (the row names, the shapes), so no string is made per slice or per op."""

    ops: np.ndarray
    key_codes: np.ndarray  # row name of each op (ProfilerStep#N -> ProfilerStep*), as a code into key_names
    key_names: pa.Array  # distinct row names
    shape_codes: np.ndarray  # input shapes text of each op ("[]" when absent), as a code into shape_names
    shape_names: pa.Array
    python: np.ndarray  # bool per op: a python_function frame
    dur: np.ndarray
    self_cpu: np.ndarray
    self_dev: np.ndarray  # per slice: device time of the executions it launched directly
    tparent: np.ndarray  # per slice: nearest enclosing tree node, -1 none
    device_all: int  # all device execution time of the run: the 100 % of device %
    # per slice: the self device time its row shows: a frame's launches moved up to the nearest enclosing
    # non-frame op (None: self_dev, nothing moved)
    row_dev: np.ndarray | None = None
    runtime: np.ndarray | None = None  # bool per op: a runtime call that launched outside any op (None: none)

    @property
    def row_device(self) -> np.ndarray:
        return self.self_dev if self.row_dev is None else self.row_dev


def compute_op_stats(slices: pa.Table, flows: pa.Table | None = None) -> tuple[pa.Table, pa.Table]:
    """(per name, per name and input shapes) op tables, sorted by device time then CPU time. With the run's
    `flows`, runtime calls that launched device work outside any op are rows too (kind `runtime`)."""
    if slices.num_rows == 0:
        return OP_STATS.empty_table(), OP_STATS.empty_table()
    ev = compute_op_events(slices, flows)
    return group_op_events(ev, by_shape=False), group_op_events(ev, by_shape=True)


def compute_op_stats_by_module(slices: pa.Table, by_shape: bool = False, flows: pa.Table | None = None) -> pa.Table:
    """Op table per (enclosing nn.Module path, name[, input shapes]); path "" outside any module."""
    if slices.num_rows == 0:
        return OP_STATS_BY_MODULE.empty_table()
    ev = compute_op_events(slices, flows)
    return group_op_events(ev, by_shape=by_shape, modules=module_paths(ev, slices))


def compute_op_events(slices: pa.Table, flows: pa.Table | None = None) -> OpEvents:
    """The op tree of `slices` (columns of SLICES, `shapes` optional; texts as strings or dictionaries) with
    self CPU and self device time; with `flows` (FLOWS, slice positions), device executions no op launched
    count for the runtime call that launched them."""
    # names as integer codes (one per distinct name): no Python string per slice
    name, names = text_codes(slices.column("name"))
    lane = _on_runtime_lane(slices.column("lane"))
    is_op = slices.column("is_op").to_numpy(zero_copy_only=False)
    hidden_names = pa.array(sorted(HIDDEN_OP_NAMES), pa.string())  # (not at import: pyarrow would load pandas)
    hidden = pc.is_in(names, value_set=hidden_names).to_numpy(zero_copy_only=False)[name]
    is_op = is_op & ~hidden
    node = is_op | (lane & ~hidden)
    del lane, hidden
    tparent = nearest_ancestor_where(slices.column("parent_id").to_numpy(), node)
    dur = slices.column("dur_ns").to_numpy()

    self_dev = np.zeros(len(dur), dtype=np.int64)
    op_id = slices.column("op_id").to_numpy()
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False)
    dev = np.nonzero(devtime & (op_id >= 0))[0]
    np.add.at(self_dev, op_id[dev], dur[dev])
    del dev
    launcher, executions = bare_launches(slices, flows)
    np.add.at(self_dev, launcher, dur[executions])
    runtime_row = np.zeros(len(dur), dtype=bool)
    runtime_row[launcher] = node[launcher]
    del executions
    removed = _remove_duplicate_children(name, node, tparent, self_dev)
    node &= ~removed
    is_op &= ~removed
    del removed
    self_dev[~node] = 0  # device time of hidden ops is not in the table (as in torch)

    self_cpu = np.where(node, dur, 0).astype(np.int64, copy=False)
    child = np.nonzero(node & (tparent >= 0))[0]
    np.subtract.at(self_cpu, tparent[child], dur[child])
    del child, node

    python_slice = pc.equal(slices.column("cat"), PYTHON_CATEGORY).to_numpy(zero_copy_only=False)
    row_dev = _roll_up_frames(self_dev, tparent, is_op & ~python_slice & ~_annotations(slices), python_slice)
    ops = np.nonzero(is_op | runtime_row)[0]
    key_of_name, key_names = _recoded(pc.replace_substring_regex(names, r"^ProfilerStep#\d+$", "ProfilerStep*"))
    key_codes = key_of_name[name[ops]]
    if "shapes" in slices.column_names:
        shape, shapes = text_codes(slices.column("shapes"), ops)
        shape_of, shape_names = _recoded(pc.if_else(pc.equal(shapes, ""), "[]", shapes))
        shape_codes = shape_of[shape]
    else:
        shape_codes, shape_names = np.zeros(len(ops), np.int64), pa.array(["[]"], pa.string())
    return OpEvents(ops, key_codes, key_names, shape_codes, shape_names, python_slice[ops], dur[ops], self_cpu[ops],
                    self_dev, tparent, int(dur[devtime].sum()), row_dev, runtime_row[ops])


def bare_launches(slices: pa.Table, flows: pa.Table | None) -> tuple[np.ndarray, np.ndarray]:
    """(launching runtime call, device execution) position pairs of the executions no op launched: an
    execute flow from a runtime call (a driver or runtime launch outside any op and any frame)."""
    none = np.zeros(0, np.int64)
    if flows is None or flows.num_rows == 0:
        return none, none
    op_id = slices.column("op_id").to_numpy()
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False)
    frm, to = flows.column("from_slice").to_numpy(), flows.column("to_slice").to_numpy()
    execute = pc.equal(flows.column("kind"), FlowKind.EXECUTE.value).to_numpy(zero_copy_only=False)
    n = len(op_id)
    ok = execute & (frm >= 0) & (frm < n) & (to >= 0) & (to < n)
    frm, to = frm[ok], to[ok]
    lanes = slices.column("lane").take(pa.array(frm))
    keep = devtime[to] & (op_id[to] < 0) & _on_runtime_lane(lanes)
    frm, to = frm[keep], to[keep]
    to, first = np.unique(to, return_index=True)  # one launcher per execution
    return frm[first].astype(np.int64), to.astype(np.int64)


def _annotations(slices: pa.Table) -> np.ndarray:
    """True per record_function range (cat user_annotation, any case): ProfilerStep#N, a framework's
    "execute_model"... A region, not the op that launched: a frame's launch does not roll up to one."""
    cat, cats = text_codes(slices.column("cat"))
    is_annotation: np.ndarray = pc.fill_null(pc.equal(pc.utf8_lower(cats), ANNOTATION_CATEGORY), False).to_numpy(
        zero_copy_only=False)
    return is_annotation[cat] if len(cats) else np.zeros(len(cat), bool)


def _roll_up_frames(self_dev: np.ndarray, tparent: np.ndarray, op: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """self_dev with each Python frame's share moved to its nearest enclosing op (a frame with no op above
    keeps its own: the launching frame)."""
    row_dev = self_dev.copy()
    moving = np.nonzero(frame & (self_dev > 0))[0]
    if not len(moving):
        return row_dev
    target = nearest_ancestor_where(tparent, op)[moving]
    up = target >= 0
    np.add.at(row_dev, target[up], self_dev[moving[up]])
    row_dev[moving[up]] = 0
    return row_dev


def text_codes(texts: pa.Array | pa.ChunkedArray, rows: np.ndarray | None = None) -> tuple[np.ndarray, pa.Array]:
    """(a code per value, or per value at `rows`; the distinct values the codes index): equal codes where the
    texts are equal. A dictionary column (the ingest's in-memory slices) gives its own codes; a text column (a
    stored run's) is encoded. Nulls get a code of their own."""
    if not pa.types.is_dictionary(texts.type):
        texts = pc.dictionary_encode(texts, null_encoding="encode")
    chunks = texts.unify_dictionaries().chunks if isinstance(texts, pa.ChunkedArray) else [texts]
    values = chunks[0].dictionary if chunks else pa.array([], pa.string())
    parts = [c.indices.to_numpy(zero_copy_only=False) for c in chunks]
    codes = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    return (codes if rows is None else codes[rows]), values


def _recoded(values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Values that may repeat (after a rewrite, e.g. ProfilerStep#N -> ProfilerStep*) as (a new code per old
    code, the distinct values the new codes index)."""
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def _on_runtime_lane(lanes: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """True per slice on the runtime lane."""
    runtime: np.ndarray = pc.equal(lanes, Lane.RUNTIME.value).to_numpy(zero_copy_only=False)
    return runtime


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


def module_paths(ev: OpEvents, slices: pa.Table) -> pa.Array:
    """Per op: its chain of enclosing nn.Module frames, outermost first ("Net_0/Linear_1"), "" if none.
    Module frames count whether or not they are in the table (a time range keeps only some)."""
    n = len(ev.tparent)
    name, names = text_codes(slices.column("name"))
    is_module = (pc.equal(slices.column("cat"), PYTHON_CATEGORY).to_numpy(zero_copy_only=False)
                 & pc.starts_with(names, MODULE_FRAME_PREFIX).to_numpy(zero_copy_only=False)[name])
    frames = np.nonzero(is_module)[0]
    outer = nearest_ancestor_where(ev.tparent, is_module)
    path = np.full(n, "", dtype=object)
    short = pc.utf8_slice_codeunits(names.take(pa.array(name[frames])), len(MODULE_FRAME_PREFIX)).to_numpy(
        zero_copy_only=False)
    done = outer[frames] < 0
    path[frames[done]] = short[done]
    resolved = np.zeros(n, dtype=bool)
    resolved[frames[done]] = True
    while not done.all():  # outermost first: a frame's path is ready once its enclosing frame's is
        ready = ~done & resolved[np.maximum(outer[frames], 0)]
        path[frames[ready]] = path[outer[frames[ready]]] + "/" + short[ready]
        resolved[frames[ready]] = True
        done |= ready
    enclosing = outer[ev.ops]
    return pa.array(np.where(enclosing >= 0, path[np.maximum(enclosing, 0)], ""), pa.string())


def group_op_events(ev: OpEvents, by_shape: bool, modules: pa.Array | None = None) -> pa.Table:
    """Rows per name (and input shapes, and module path when given), sorted by device then CPU time.
    A row's kind is `python` when all its events are python frames, `runtime` when all are runtime calls that
    launched outside any op, `operator` otherwise."""
    codes = ev.key_codes
    if by_shape:
        codes = _pair_codes(codes, ev.shape_codes)
    if modules is not None:
        codes = _pair_codes(_recoded(modules)[0], codes)
    groups, first, codes = np.unique(codes, return_index=True, return_inverse=True)
    g = len(groups)
    calls = np.bincount(codes, minlength=g).astype(np.int64)
    cpu_total, self_cpu, self_dev = (_sum_by(codes, g, v) for v in (ev.dur, ev.self_cpu, ev.row_device[ev.ops]))
    python_calls = np.bincount(codes[ev.python], minlength=g)
    runtime_calls = np.bincount(codes[ev.runtime], minlength=g) if ev.runtime is not None else np.zeros(g, np.int64)
    kind = np.where(python_calls == calls, "python", np.where(runtime_calls == calls, RUNTIME_KIND, "operator"))
    pct = self_dev / ev.device_all * 100.0 if ev.device_all else np.zeros(g)
    pick = pa.array(first)
    columns: dict[str, pa.Array | np.ndarray] = {}
    if modules is not None:
        columns["module"] = modules.take(pick)
    columns |= {
        "name": ev.key_names.take(pa.array(ev.key_codes[first])),
        "input_shapes": ev.shape_names.take(pa.array(ev.shape_codes[first])) if by_shape else
        pa.array([""] * g, pa.string()),
        "kind": pa.array(kind, pa.string()),
        "calls": calls, "cpu_total_ns": cpu_total, "self_cpu_ns": self_cpu,
        "cpu_avg_ns": cpu_total // np.maximum(calls, 1),
        "device_total_ns": _device_totals(ev, codes, g), "self_device_ns": self_dev, "device_pct": pct,
    }
    out = pa.table(columns, schema=OP_STATS_BY_MODULE if modules is not None else OP_STATS)
    # ties broken by every key column: the same order whatever order the slices (or their texts' codes) came in
    ties = [("name", "ascending"), ("input_shapes", "ascending")] + (
        [("module", "ascending")] if modules is not None else [])
    return out.sort_by([("device_total_ns", "descending"), ("cpu_total_ns", "descending"), *ties])


def _pair_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One code per (a, b) pair, equal where both are equal: each side compacted first, so the pair's code
    stays below len(a) * len(b)."""
    a = np.unique(a, return_inverse=True)[1].astype(np.int64)
    b_codes, b = np.unique(b, return_inverse=True)
    return a * len(b_codes) + b.astype(np.int64)


def _sum_by(codes: np.ndarray, groups: int, values: np.ndarray) -> np.ndarray:
    """Exact int64 sums per group (np.bincount's weights would go through float64)."""
    out = np.zeros(groups, dtype=np.int64)
    np.add.at(out, codes, values.astype(np.int64))
    return out


def _device_totals(ev: OpEvents, codes: np.ndarray, groups: int) -> np.ndarray:
    """Per row: the device time launched by its ops or their descendants, each launch counted once
    per row. Each launching node walks up its ancestors and adds its time to every row it meets, except
    a row met already lower on its chain: a kernel under frames f -> g -> f counts once for f (torch's
    key_averages would count it twice). The rows met so far are kept per level (a chain of recursive
    frames is rare and short); past DEDUP_LEVELS levels the pairs are deduplicated by sorting instead."""
    code_of = np.full(len(ev.tparent), -1, dtype=np.int64)
    code_of[ev.ops] = codes
    origin = np.nonzero(ev.self_dev > 0)[0]
    dev = ev.self_dev[origin]
    who, cur = np.arange(len(origin), dtype=np.int64), origin.copy()
    total = np.zeros(groups, dtype=np.int64)
    seen: list[np.ndarray] = []  # per level so far: the row each chain met there (-1 none), by chain
    while len(cur):
        if len(seen) >= DEDUP_LEVELS:
            return _device_totals_sorted(ev, code_of, origin, who, cur, seen, groups, total)
        c = code_of[cur]
        fresh = c >= 0
        for level in seen:
            fresh &= level[who] != c
        np.add.at(total, c[fresh], dev[who[fresh]])
        row = np.full(len(origin), -1, dtype=np.int32)  # codes < 2**31: fewer rows than slices
        row[who] = c
        seen.append(row)
        cur = ev.tparent[cur]
        keep = cur >= 0
        who, cur = who[keep], cur[keep]
    return total


DEDUP_LEVELS = 24


def _device_totals_sorted(ev: OpEvents, code_of: np.ndarray, origin: np.ndarray, who: np.ndarray, cur: np.ndarray,
                          seen: list[np.ndarray], groups: int, total: np.ndarray) -> np.ndarray:
    """_device_totals for chains deeper than DEDUP_LEVELS: the (chain, row) pairs of the deep chains (their
    levels so far and the rest), deduplicated by sorting, and those not counted yet added to `total`."""
    deep = np.unique(who)
    pairs = [deep[level[deep] >= 0] * groups + level[deep][level[deep] >= 0] for level in seen]
    counted = np.unique(np.concatenate(pairs)) if pairs else np.zeros(0, np.int64)
    while len(cur):
        c = code_of[cur]
        hit = c >= 0
        pairs.append(who[hit] * groups + c[hit])
        cur = ev.tparent[cur]
        keep = cur >= 0
        who, cur = who[keep], cur[keep]
    unique = np.setdiff1d(np.unique(np.concatenate(pairs)), counted, assume_unique=True)
    np.add.at(total, unique % groups, ev.self_dev[origin[unique // groups]])
    return total


def device_time_summary(slices: pa.Table, flows: pa.Table | None = None) -> dict[str, int]:
    """Total device execution time, and how much of it is attributed: launched by a framework op or frame,
    or (with `flows`) by a runtime call outside any op. The op table's rows sum to the attributed time."""
    if slices.num_rows == 0:
        return {"device_total_ns": 0, "attributed_ns": 0, "unattributed_ns": 0}
    devtime = slices.column("device_time").to_numpy(zero_copy_only=False)
    dur = slices.column("dur_ns").to_numpy()
    op_id = slices.column("op_id").to_numpy()
    total = int(dur[devtime].sum())
    attributed = int(dur[devtime & (op_id >= 0)].sum()) + int(dur[bare_launches(slices, flows)[1]].sum())
    return {"device_total_ns": total, "attributed_ns": attributed, "unattributed_ns": total - attributed}
