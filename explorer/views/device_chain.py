"""The dependency-chain page of a Neuron device profile and its JSON twin: the chain (explorer.analysis.device.chain)
with times relative to the run's origin on the timeline's axis (the profile's alignment shift applied), and links
to step further up. Computed once; nothing formatted here.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from explorer.analysis.device.chain import Chain, Edge, Node, compute_chain, parse_node_ref
from explorer.analysis.device.rows import Tables
from explorer.errors import BadRequest
from explorer.model.device_shapes import ChainEdgeJson, ChainNodeJson, DeviceChainJson, DeviceProfileJson
from explorer.model.shapes import RunJson
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore
from explorer.views.device import load_profile_tables, profile_alignment, resolve_profile

CHAIN_MODES = ("step", "trace")


def _node(n: Node, origin: int) -> ChainNodeJson:
    return {"table": n.table, "id": n.id, "lane": n.lane, "label": n.label, "start_ns": n.start_ns - origin,
            "end_ns": n.end_ns - origin, "wait_start_ns": n.ready_ns - origin, "wait_ns": n.wait_ns}


def _edge(e: Edge, origin: int) -> ChainEdgeJson:
    return {"upstream": _node(e.upstream, origin), "downstream": _node(e.downstream, origin), "kind": e.kind,
            "wait_ns": e.wait_ns}


def chain_json(chain: Chain, profile_id: str, mode: str, origin: int) -> DeviceChainJson:
    return {"profile": profile_id, "mode": mode, "node": _node(chain.node, origin),
            "upstream": [_edge(e, origin) for e in chain.upstream],
            "downstream": [_edge(e, origin) for e in chain.downstream],
            "steps": [_edge(e, origin) for e in chain.steps],
            "root": None if chain.root is None else _node(chain.root, origin),
            "total_wait_ns": sum(e.wait_ns for e in chain.steps),
            "wait_by_lane": [{"lane": lane, "wait_ns": w} for lane, w in chain.wait_by_lane]}


def compute_chain_json(tables: Tables, profile: DeviceProfileJson, node: str, mode: str,
                       origin: int) -> DeviceChainJson:
    """GET .../device/{profile}/chain?node=Instruction:<id>&mode=step|trace."""
    if mode not in CHAIN_MODES:
        raise BadRequest(f"mode is one of {', '.join(CHAIN_MODES)}, not {mode!r}")
    name, ident = parse_node_ref(node)
    return chain_json(compute_chain(tables, name, ident, mode == "trace"), profile["profile_id"], mode, origin)


def run_chain_json(store: RunStore, rec: RunRecord, profile: str, node: str, mode: str) -> DeviceChainJson:
    """The chain of one node of a run's device profile: what the route and the notebook API return."""
    chosen = resolve_profile(store, rec, profile)
    shift = profile_alignment(store, rec, chosen)["shift_ns"]  # device clock -> the timeline's (host) clock
    return compute_chain_json(load_profile_tables(store, rec.id, chosen), chosen, node, mode,
                              rec.summary.start_ns - shift)


def chain_query(node: str, mode: str) -> str:
    return urlencode({"node": node, "mode": mode}, safe=":")


@dataclass
class DeviceChainPage:
    """`/runs/{id}/device/{profile}/chain?node=&mode=`; twin `/api/runs/{id}/device/{profile}/chain`, same query."""

    run: RunJson
    profile: DeviceProfileJson
    chain: DeviceChainJson
    twin: str = ""


def build_chain_page(run: RunJson, profile: DeviceProfileJson, chain: DeviceChainJson, node: str,
                     mode: str) -> DeviceChainPage:
    return DeviceChainPage(run, profile, chain,
                           f"{profile['links']['self']}/chain?{chain_query(node, mode)}")
