"""What the offline report embeds so its timeline answers by the server's rules (the slices search runs over,
the op events a range op table sums, each drawn slice's linked chain), computed by the server's own
functions and embedded whole or not at all, within SNAPSHOT_PART_BYTES each; static/js/sources.js only
reads them."""

from __future__ import annotations

import json
from typing import Any

from explorer.analysis.chain import compute_chain
from explorer.analysis.op_events import compute_op_event_rows
from explorer.analysis.timeline.index import TimelineIndex
from explorer.store.queries import (
    DEFAULT_OP_VIEW,
    LAUNCH_SITE_VIEWS,
    OP_VIEWS,
    default_op_sort,
    load_op_inputs,
    run_device_total_ns,
)
from explorer.store.runs import RunStore

SNAPSHOT_CHAIN_SLICES = 3000  # drawn slices whose linked chains a report embeds, at most
SNAPSHOT_RULE_ROWS = 200_000  # slices (for search) and op events (for range op tables) embedded, at most
# JSON bytes of each of search, range op events and chains a report embeds, at most: on HTA's trace_diff/control
# (33 MB of trace, 75k slices) they were 2.4, 2.1 and 4.3 MB of a 10.6 MB report, for features of a server
SNAPSHOT_PART_BYTES = 1_000_000


def json_size(value: Any) -> int:
    """Bytes of `value` as a report embeds it (compact JSON; its script escaping changes no length)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def within(value: Any, max_bytes: int) -> Any:
    """`value`, or None when its JSON is over `max_bytes`."""
    return value if value is not None and json_size(value) <= max_bytes else None


def snapshot_chains(store: RunStore, run_id: str, slice_ids: list[int], origin_ns: int,
                    max_slices: int = SNAPSHOT_CHAIN_SLICES,
                    max_bytes: int = SNAPSHOT_PART_BYTES) -> dict[str, list[dict[str, Any]]] | None:
    """The server's linked chain (analysis.chain.compute_chain) of each drawn slice that has one longer
    than itself; None when more than `max_slices` slices are drawn or the chains' JSON is over `max_bytes`
    (the offline panel says so: a chain missing from the map would read as "links nothing")."""
    if len(slice_ids) > max_slices:
        return None
    slices, flows = store.table(run_id, "slices"), store.table(run_id, "flows")
    chains = {}
    spent = 0
    for sid in sorted(set(slice_ids)):
        chain = compute_chain(slices, flows, sid, origin_ns)
        if len(chain) > 1:
            chains[str(sid)] = chain
            spent += json_size(chain)
            if spent > max_bytes:
                return None
    return chains if json_size(chains) <= max_bytes else None


def snapshot_rules(store: RunStore, run_id: str, ix: TimelineIndex, max_rows: int = SNAPSHOT_RULE_ROWS,
                   max_bytes: int = SNAPSHOT_PART_BYTES) -> dict[str, Any]:
    """What the offline timeline needs to answer search and range op tables by the server's rules:
    the slices the server searches (analysis.search) and the op events load_ops_in_range sums, with
    the op table's default sort and its views. Either is None when the run has more than `max_rows` of them
    or its JSON is over `max_bytes`."""
    rec = store.require_ready(run_id)
    search = None
    if len(ix.slice_id) <= max_rows:
        search = {"names": ix.names, "id": ix.slice_id.tolist(), "name": ix.name.tolist(), "ts": ix.ts.tolist(),
                  "dur": ix.dur.tolist(), "track": ix.slice_track[ix.slice_id].tolist()}
    slices, flows = load_op_inputs(store, run_id)
    ops = None
    if slices.num_rows <= max_rows:
        ops = {**compute_op_event_rows(slices, rec.summary.start_ns, flows),
               "sort": default_op_sort(run_device_total_ns(rec)), "views": OP_VIEWS, "default_view": DEFAULT_OP_VIEW,
               "sorts": {v: default_op_sort(run_device_total_ns(rec), v) for v in OP_VIEWS},
               "launch_site_views": sorted(LAUNCH_SITE_VIEWS)}
    return {"search": within(search, max_bytes), "ops": within(ops, max_bytes)}

