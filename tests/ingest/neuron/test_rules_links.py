"""Builder behaviour the Neuron join relies on: explicit launch/execute links hand an op down a chain
across threads, without changing what correlation / External id attribution already decided."""

from __future__ import annotations

import pytest

from explorer.ingest.builder import TraceBuilder
from explorer.model.lanes import FlowKind, Lane


def build(links: list[tuple[str, str, FlowKind]]) -> dict[str, tuple[str, int]]:
    """op (thread 1) -> driver (thread 2) -> schedule (thread 3) -> device (thread 4), linked as told;
    returns each slice's op name and the op table's device totals."""
    b = TraceBuilder()
    src = b.add_source("t")
    raw = {
        "op": b.add_slice(b.thread(src, 1, 1), "cpu_op", "aten::mul", 0, 100),
        "driver": b.add_slice(b.thread(src, 1, 2), "privateuse1_driver", "stream", 10, 400),
        "schedule": b.add_slice(b.thread(src, 1, "neuron_rt/NC:0"), "neuron_rt", "nrta_execute_schedule", 20, 30),
        "device": b.add_slice(b.thread(src, 1, "neuron_hw/NC:0"), "neuron_hw", "nc_exec_running", 60, 300,
                              lane=Lane.HARDWARE),
    }
    for a, z, kind in links:
        b.add_link(raw[a], raw[z], kind)
    trace = b.finish()
    slices = trace.tables["slices"].to_pylist()
    names = {s["slice_id"]: s["name"] for s in slices}
    by_name = {s["name"]: s for s in slices}
    ops = {r["name"]: r["device_total_ns"] for r in trace.tables["op_stats"].to_pylist()}
    out = {}
    for key, name in (("driver", "stream"), ("schedule", "nrta_execute_schedule"), ("device", "nc_exec_running")):
        op_id = by_name[name]["op_id"]
        out[key] = (names.get(op_id, ""), ops["aten::mul"])
    return out


CHAIN = [("op", "driver", FlowKind.LAUNCH), ("driver", "schedule", FlowKind.LAUNCH),
         ("schedule", "device", FlowKind.EXECUTE)]


@pytest.mark.parametrize(("links", "attributed"), [
    (CHAIN, {"driver", "schedule", "device"}),
    (list(reversed(CHAIN)), {"driver", "schedule", "device"}),  # order of links does not matter
    (CHAIN[1:], set()),  # no launch from the op: nothing to hand down
    ([("op", "schedule", FlowKind.LAUNCH), ("schedule", "device", FlowKind.EXECUTE)], {"schedule", "device"}),
    ([("op", "device", FlowKind.EXECUTE)], {"device"}),
])
def test_launch_chain_hands_the_op_down(links: list[tuple[str, str, FlowKind]], attributed: set[str]) -> None:
    result = build(links)
    assert {k for k, (op, _dev) in result.items() if op == "aten::mul"} == attributed
    assert result["device"][1] == (300 if "device" in attributed else 0)


def test_generic_and_fwdbwd_links_do_not_attribute() -> None:
    result = build([("op", "driver", FlowKind.GENERIC), ("driver", "schedule", FlowKind.FWDBWD),
                    ("schedule", "device", FlowKind.EXECUTE)])
    assert all(op == "" for op, _dev in result.values())
