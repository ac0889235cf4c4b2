"""Event details: the parent chain, a children summary and the linked chain across lanes (forward op ->
framework op -> launch -> execution -> backward op), each link timed from the link it follows. Pure
functions over a run's cached columns; no I/O. The chain's rule: docs/architecture.md, "analysis/chain.py"."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.model.lanes import FlowKind, Lane

MAX_LINKS = 64
MAX_CHILDREN = 10
MAX_PARENTS = 64


def build_event_detail(slices: pa.Table, flows: pa.Table, row: dict[str, Any], origin_ns: int) -> dict[str, Any]:
    """Everything the details panel shows for one slice; `row` is its full stored row (with args)."""
    sid = int(row["slice_id"])
    parent = slices.column("parent_id").to_numpy()
    try:
        args = json.loads(row.get("args") or "{}")
    except ValueError:
        args = {"_raw": row.get("args")}
    event = {k: row.get(k) for k in ("slice_id", "track_id", "lane", "name", "cat", "ts_ns", "dur_ns", "depth",
                                     "correlation", "external_id", "op_id")}
    event["ts_rel_ns"] = int(row["ts_ns"]) - origin_ns
    event["args"] = args
    parents: list[dict[str, Any]] = []
    cur = int(parent[sid])
    while cur >= 0 and len(parents) < MAX_PARENTS:
        parents.append(_brief(slices, cur, origin_ns))
        cur = int(parent[cur])
    kids = np.flatnonzero(parent == sid)
    dur = slices.column("dur_ns").to_numpy()
    top = kids[np.argsort(-dur[kids], kind="stable")[:MAX_CHILDREN]]
    children = {"count": len(kids),
                "top": [{k: b[k] for k in ("slice_id", "name", "dur_ns")}
                        for b in (_brief(slices, int(c), origin_ns) for c in top)]}
    return {"event": event, "parents": parents, "children": children,
            "chain": compute_chain(slices, flows, sid, origin_ns)}


def compute_chain(slices: pa.Table, flows: pa.Table, sid: int, origin_ns: int) -> list[dict[str, Any]]:
    """The linked chain through `sid`, ordered upstream to downstream; each link's `gap_ns` is from the start of
    the link it follows (`after`) to its own start."""
    f_from = flows.column("from_slice").to_numpy()
    f_to = flows.column("to_slice").to_numpy()
    kind = flows.column("kind")
    execute, fwdbwd, generic = (pc.equal(kind, k).to_numpy(zero_copy_only=False).astype(bool)
                                for k in (FlowKind.EXECUTE, FlowKind.FWDBWD, FlowKind.GENERIC))
    op_id = slices.column("op_id").to_numpy()
    lane = _lane_of(slices, sid)
    is_op = bool(slices.column("is_op")[sid].as_py())
    links: list[tuple[int, str, int | None]] = []  # (slice, relation, the slice it follows)
    if lane == Lane.FRAMEWORK:
        ops = [sid] if is_op else []
        runtime = _runtime_under(slices, op_id, sid) if is_op else []
    elif lane == Lane.RUNTIME:
        ops = [int(op_id[sid])] if op_id[sid] >= 0 else []
        runtime = [sid]
    else:
        launchers = f_from[(f_to == sid) & execute]
        runtime = [int(x) for x in launchers[:1]]
        op = int(op_id[sid]) if op_id[sid] >= 0 else (int(op_id[runtime[0]]) if runtime else -1)
        ops = [op] if op >= 0 else []
    for op in ops:
        forward = [int(a) for a in f_from[(f_to == op) & fwdbwd][:4]]
        links += [(a, "fwdbwd", None) for a in forward]
        links.append((op, "op", forward[-1] if forward else None))
    for call in runtime[:MAX_LINKS]:
        links.append((call, "launch", ops[0] if ops else None))
        if lane == Lane.HARDWARE:
            links.append((sid, "execute", call))
            continue
        links += [(int(b), "execute", call) for b in f_to[(f_from == call) & execute][:MAX_LINKS]]
    for op in ops:
        links += [(int(b), "fwdbwd", op) for b in f_to[(f_from == op) & fwdbwd][:4]]
    if not any(s == sid for s, _, _ in links):
        links.append((sid, "self", None))
    seen = {s for s, _, _ in links}
    links += [(int(b), "generic", sid) for b in f_to[(f_from == sid) & generic][:8] if int(b) not in seen]
    return _with_gaps(slices, links[: 4 * MAX_LINKS], sid, origin_ns)


def _runtime_under(slices: pa.Table, op_id: np.ndarray, op: int) -> list[int]:
    """Runtime calls made by `op` or by ops nested in it, in time order."""
    parent = slices.column("parent_id").to_numpy()
    ts = slices.column("ts_ns").to_numpy()
    dur = slices.column("dur_ns").to_numpy()
    start, end = int(ts[op]), int(ts[op] + dur[op])
    runtime = pc.equal(slices.column("lane"), Lane.RUNTIME).to_numpy(zero_copy_only=False).astype(bool)
    cand = np.flatnonzero(runtime & (op_id >= 0) & (ts >= start) & (ts <= end)).tolist()
    inside = []
    for c in cand:
        cur = int(op_id[c])
        while cur >= 0 and cur != op:
            cur = int(parent[cur])
        if cur == op:
            inside.append(c)
    return sorted(inside, key=lambda c: int(ts[c]))


def _lane_of(slices: pa.Table, sid: int) -> str:
    return str(slices.column("lane")[sid].as_py())


def _brief(slices: pa.Table, sid: int, origin_ns: int) -> dict[str, Any]:
    row = slices.slice(sid, 1)
    return {"slice_id": sid, "name": row.column("name")[0].as_py(), "lane": row.column("lane")[0].as_py(),
            "track_id": row.column("track_id")[0].as_py(),
            "ts_rel_ns": int(row.column("ts_ns")[0].as_py()) - origin_ns, "dur_ns": row.column("dur_ns")[0].as_py()}


def _with_gaps(slices: pa.Table, links: list[tuple[int, str, int | None]], sid: int,
               origin_ns: int) -> list[dict[str, Any]]:
    """The chain items; a link whose `after` is not in the chain has no gap (null), as the first one."""
    out: list[dict[str, Any]] = []
    start_of: dict[int, int] = {}
    for s, relation, after in links:
        if not 0 <= s < slices.num_rows:
            continue
        item = _brief(slices, s, origin_ns)
        item["relation"] = "self" if s == sid else relation
        item["after"] = after if after in start_of else None
        item["gap_ns"] = None if item["after"] is None else item["ts_rel_ns"] - start_of[item["after"]]
        start_of.setdefault(s, item["ts_rel_ns"])
        out.append(item)
    return out
