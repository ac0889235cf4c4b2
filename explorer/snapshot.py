"""What the offline report embeds so its timeline answers by the server's rules: the slices search
runs over, the op events a range op table sums, and the linked chain of each drawn slice.

Each is computed by the function the server's route uses (analysis.search's inputs, analysis.op_events,
analysis.chain); static/js/sources.js SnapshotSource only reads them. The window itself is report.py's.
"""

from __future__ import annotations

from typing import Any

from explorer.analysis.chain import compute_chain
from explorer.analysis.lod import TimelineIndex
from explorer.analysis.op_events import compute_op_event_rows
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


def snapshot_chains(store: RunStore, run_id: str, slice_ids: list[int], origin_ns: int,
                    max_slices: int = SNAPSHOT_CHAIN_SLICES) -> dict[str, list[dict[str, Any]]] | None:
    """The server's linked chain (analysis.chain.compute_chain) of each drawn slice that has one longer
    than itself; None when more than `max_slices` slices are drawn (the offline panel says so)."""
    if len(slice_ids) > max_slices:
        return None
    slices, flows = store.table(run_id, "slices"), store.table(run_id, "flows")
    chains = {}
    for sid in sorted(set(slice_ids)):
        chain = compute_chain(slices, flows, sid, origin_ns)
        if len(chain) > 1:
            chains[str(sid)] = chain
    return chains


def snapshot_rules(store: RunStore, run_id: str, ix: TimelineIndex,
                   max_rows: int = SNAPSHOT_RULE_ROWS) -> dict[str, Any]:
    """What the offline timeline needs to answer search and range op tables by the server's rules:
    the slices the server searches (analysis.search) and the op events load_ops_in_range sums, with
    the op table's default sort and its views. Either is None when the run has more than `max_rows` of them."""
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
    return {"search": search, "ops": ops}

