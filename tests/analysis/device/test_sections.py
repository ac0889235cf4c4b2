"""The device page's sections from hand-made rows: framework node time as the union of its intervals,
HLO groups under it with their instruction count and active time, the tensor table's reload rule and
the SBUF rectangles."""

from __future__ import annotations

import json

import pyarrow as pa

from explorer.analysis.device.sections import compute_hierarchy, compute_sbuf_rects, compute_tensor_table
from tests.helpers.device_tables import union_length


def test_hierarchy_groups_instructions_by_hlo() -> None:
    insts = [(0, 10, 2, "mm", "dot.1"), (5, 20, 0, "mm", "dot.1"), (30, 40, 5, "mm", "add.2"), (50, 60, 0, "t", None)]
    instructions = pa.table({"start_ts": [i[0] for i in insts], "end_ts": [i[1] for i in insts],
                             "evt_wait_time_ns": [i[2] for i in insts], "layer": [i[3] for i in insts],
                             "hlo_name": [i[4] for i in insts]})
    intervals = [[0, 25], [20, 45], [100, 110]]
    nodes = pa.table({"node_name": ["mm", "t"], "parent_name": ["model", "model"],
                      "time_intervals": [json.dumps(intervals), ""], "start_ts": [0, 50], "end_ts": [45, 60],
                      "hfu": [12.5, None], "hbm_read_bytes": [1, 2], "hbm_write_bytes": [3, 4]})
    got = {n["node_name"]: n for n in compute_hierarchy({"Instruction": instructions, "FrameworkNode": nodes})}
    assert got["mm"]["time_ns"] == union_length([(a, b) for a, b in intervals]) == 55
    assert got["t"]["time_ns"] == 10  # no intervals: its span
    assert got["mm"]["instruction_count"] == 3
    dot = union_length([(0 + 2, 10), (5, 20)])  # waits are not active time
    assert [(c["hlo_name"], c["instruction_count"], c["active_time_ns"]) for c in got["mm"]["children"]] == [
        ("dot.1", 2, dot), ("add.2", 1, 5)]
    assert [(c["hlo_name"], c["instruction_count"]) for c in got["t"]["children"]] == [("", 1)]
    assert compute_hierarchy({"Instruction": instructions}) == []


def test_reload_factor_is_published_else_loaded_over_size() -> None:
    rows = pa.table({"variable_name": ["a", "b", "c"], "size": [100, 100, 0],
                     "load_to_sbuf_total_size_bytes": [300, 250, 10],
                     "load_to_sbuf_repeat_factor": pa.array([2.0, None, None], pa.float64())})
    got = {t["variable_name"]: t["sbuf_reload_factor"] for t in compute_tensor_table({"TensorInfo": rows})}
    assert got == {"a": 2.0, "b": 2.5, "c": None}


def test_sbuf_rectangles_keep_rows_with_times_and_addresses() -> None:
    rows = pa.table({"start_ts": [5, 1, None], "end_ts": [9, 3, 4], "start_address": [64, 0, 0],
                     "end_address": [128, 64, 8], "partition": [1, 0, 0], "tensor_name": ["y", "x", "z"]})
    got = compute_sbuf_rects({"SbufAllocation": rows})
    assert [(r["tensor_name"], r["start_ns"], r["end_ns"], r["start_address"], r["end_address"])
            for r in got] == [("x", 1, 3, 0, 64), ("y", 5, 9, 64, 128)]
