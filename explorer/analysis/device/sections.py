"""The device page's table sections of a Neuron profile, from the export's own tables: the hierarchy
(`FrameworkNode` -> HLO op -> instructions, time per node), the tensor table (`TensorInfo` with its SBUF
reload factor) and the SBUF memory view (`SbufAllocation` rectangles). Times stay absolute int ns here;
the page makes them relative. Empty lists when the export lacks a table.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.device.rows import Tables, Window, active_intervals, table, union_ns
from explorer.model.device_shapes import HierarchyChild, HierarchyNode, SbufRect, TensorRow


def _intervals(text: object, start: object, end: object) -> list[tuple[int, int]]:
    """`time_intervals` is JSON text `[[start, end], ...]` in ns; unreadable text falls back to the span."""
    if isinstance(text, str) and text.strip():
        try:
            pairs = json.loads(text)
            return [(int(a), int(b)) for a, b in pairs]
        except (ValueError, TypeError):
            pass
    return [(start, end)] if isinstance(start, int) and isinstance(end, int) else []


def _union(pairs: list[tuple[int, int]]) -> int:
    if not pairs:
        return 0
    s = np.asarray([a for a, _ in pairs], np.int64)
    e = np.asarray([b for _, b in pairs], np.int64)
    return union_ns(s, e, Window(int(s.min()), int(e.max())))


def _codes(rows: pa.Table | None, column: str) -> tuple[list[str], np.ndarray]:
    """A string column dictionary-encoded in Arrow (fast for millions of rows): its distinct values, with
    null and "" as "", and each row's index into them."""
    if rows is None or column not in rows.column_names:
        return [""], np.zeros(0 if rows is None else rows.num_rows, np.int64)
    encoded = pc.dictionary_encode(pc.fill_null(rows.column(column).cast(pa.string()), "")).combine_chunks()
    return [str(v) for v in encoded.dictionary.to_pylist()], encoded.indices.to_numpy().astype(np.int64)


def compute_hierarchy(tables: Tables) -> list[HierarchyNode]:
    """Framework nodes by time, longest first, each with its HLO groups (most active time first). A node's
    `time_ns` is the union of its published `time_intervals` (else [start_ts, end_ts)); its instructions
    are the `Instruction` rows whose `layer` is the node's name, grouped by `hlo_name`."""
    nodes = table(tables, "FrameworkNode")
    if nodes is None:
        return []
    rows = table(tables, "Instruction")
    empty = np.zeros(0, np.int64)
    layer_names, layer_codes = _codes(rows, "layer")
    hlo_labels, hlo_codes = _codes(rows, "hlo_name")
    act_start, act_end = active_intervals(rows) if rows is not None else (empty, empty)
    out: list[HierarchyNode] = []
    for node in nodes.to_pylist():
        name = str(node.get("node_name") or "")
        mine = layer_codes == (layer_names.index(name) if name in layer_names else -2)
        children: list[HierarchyChild] = []
        for code in np.unique(hlo_codes[mine]).tolist():
            part = mine & (hlo_codes == code)
            s, e = act_start[part], act_end[part]
            children.append({"hlo_name": hlo_labels[code], "instruction_count": int(part.sum()),
                             "active_time_ns": union_ns(s, e, Window(int(s.min()), int(e.max())))})
        children.sort(key=lambda c: (-c["active_time_ns"], c["hlo_name"]))
        out.append({
            "node_name": name, "parent_name": node.get("parent_name"),
            "time_ns": _union(_intervals(node.get("time_intervals"), node.get("start_ts"), node.get("end_ts"))),
            "hfu": node.get("hfu"), "hbm_read_bytes": node.get("hbm_read_bytes"),
            "hbm_write_bytes": node.get("hbm_write_bytes"), "instruction_count": int(mine.sum()),
            "children": children})
    return sorted(out, key=lambda n: (-n["time_ns"], n["node_name"]))


def compute_tensor_table(tables: Tables) -> list[TensorRow]:
    """TensorInfo rows, most SBUF load traffic first. `sbuf_reload_factor`: the published
    `load_to_sbuf_repeat_factor` when present, else `load_to_sbuf_total_size_bytes / size` (bytes loaded
    into SBUF over the tensor's size: 2.0 means every byte was loaded twice); None when neither is known or
    the size is 0."""
    rows = table(tables, "TensorInfo")
    if rows is None:
        return []
    out: list[TensorRow] = []
    for r in rows.to_pylist():
        size, loaded = r.get("size"), r.get("load_to_sbuf_total_size_bytes")
        factor = r.get("load_to_sbuf_repeat_factor")
        if factor is None and isinstance(size, int) and size and isinstance(loaded, int):
            factor = loaded / size
        out.append({"variable_name": r.get("variable_name"), "type": r.get("type"), "format": r.get("format"),
                    "shape": r.get("shape"), "size": size, "load_to_sbuf_total_size_bytes": loaded,
                    "load_to_sbuf_dma_count": r.get("load_to_sbuf_dma_count"), "sbuf_reload_factor": factor})
    return sorted(out, key=lambda t: (-(t["load_to_sbuf_total_size_bytes"] or 0), str(t["variable_name"])))


def compute_sbuf_rects(tables: Tables) -> list[SbufRect]:
    """SbufAllocation rows with a time and address range, by partition, time and address. `start_ns` and
    `end_ns` are the rows' `start_ts`/`end_ts` on the profile's clock (absolute); the page makes them
    relative."""
    rows = table(tables, "SbufAllocation")
    if rows is None:
        return []
    keys = ("start_ts", "end_ts", "start_address", "end_address")
    out: list[SbufRect] = [
        {"partition": r.get("partition"), "tensor_name": r.get("tensor_name"), "start_ns": int(r["start_ts"]),
         "end_ns": int(r["end_ts"]), "start_address": int(r["start_address"]),
         "end_address": int(r["end_address"])}
        for r in rows.to_pylist() if all(isinstance(r.get(k), int) for k in keys)]
    return sorted(out, key=lambda a: (a["partition"] if a["partition"] is not None else -1, a["start_ns"],
                                      a["start_address"]))
