"""The kernel table: one row per device execution name (CUDA/ROCm kernels, memcpy, memset, MTIA and
Neuron executions: slices whose `device_time` is true), with time statistics, a category from a rule
table, the ops that launched it and the launch parameters its args carry. Pure functions over columns;
loading the args from the store and formatting are elsewhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.collectives import OTHER_KERNELS
from explorer.analysis.op_stats import op_key_name
from explorer.errors import BadRequest
from explorer.model.shapes import KernelCategory, KernelRow, OpWork, RatesBasis

TOP_OPS_PER_KERNEL = 3
PERCENTILES = (50, 95)


@dataclass(frozen=True)
class CategoryRule:
    """An execution is in `category` when its event category is one of `cats` (any when empty) and
    its name matches `name` (a case-insensitive regex searched anywhere; any name when empty).
    Rules are tried in order; the first that matches wins."""

    category: str
    cats: frozenset[str] = frozenset()
    name: str = ""
    note: str = ""


MEMCPY_CATS = frozenset({"gpu_memcpy", "memcpy"})
COLLECTIVES = (r"(?:^|[^a-z])(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|send_?recv|all_?to_?all)"
               r"(?:[^a-z]|$)")

CATEGORY_RULES: tuple[CategoryRule, ...] = (
    CategoryRule("memset", frozenset({"gpu_memset", "memset"}), note="Memset (Device), Memset (Unknown)"),
    CategoryRule("memcpy HtoD", MEMCPY_CATS, r"\bHtoD\b", "Memcpy HtoD (Pageable|Pinned|Host -> Device)"),
    CategoryRule("memcpy DtoH", MEMCPY_CATS, r"\bDtoH\b", "Memcpy DtoH (Device -> Pageable|Pinned)"),
    CategoryRule("memcpy DtoD", MEMCPY_CATS, r"\bDtoD\b", "Memcpy DtoD (Device -> Device)"),
    CategoryRule("memcpy PtoP", MEMCPY_CATS, r"\bPtoP\b", "peer copy between two devices"),
    CategoryRule("memcpy other", MEMCPY_CATS, note="HtoH, array copies (AtoD, DtoA, ...)"),
    CategoryRule("communication", frozenset(), r"nccl|rccl", "ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_*"),
    CategoryRule("communication", frozenset(), COLLECTIVES, "collective names outside NCCL (not BroadcastFunctor)"),
    CategoryRule("communication", frozenset(), "|".join(f"(?:{k[0]})" for k in OTHER_KERNELS),
                 "custom all-reduce, DeepEP, NVSHMEM kernels: explorer.analysis.collectives.OTHER_KERNELS"),
    CategoryRule("communication", frozenset({"neuron_hw"}), r"^cc_", "Neuron collective execution (cc_running)"),
    CategoryRule("memcpy other", frozenset({"mtia_ccp_events"}), r"^dma_", "MTIA DMA request, no direction"),
    CategoryRule("compute", frozenset({"kernel"}), note="any other kernel (CUDA, ROCm, Triton)"),
    CategoryRule("compute", frozenset({"neuron_hw"}), r"^nc_exec", "Neuron NEFF execution (nc_exec_running)"),
    CategoryRule("compute", frozenset({"mtia_ccp_events"}), r"^pe_exe$", "MTIA processing-element execution"),
    CategoryRule("other", note="everything else: MTIA event_record / event_wait, unknown devices"),
)

KERNEL_COLUMNS = ("name", "category", "calls", "total_ns", "avg_ns", "min_ns", "max_ns", "p50_ns", "p95_ns",
                  "device_pct")
TEXT_COLUMNS = frozenset({"name", "category"})

TOP_OP = pa.struct([("name", pa.string()), ("total_ns", pa.int64())])
LAUNCH = pa.struct([
    ("grid", pa.list_(pa.int64())),
    ("block", pa.list_(pa.int64())),
    ("registers_per_thread", pa.int64()),
    ("shared_memory", pa.int64()),
    ("est_occupancy_pct", pa.float64()),
    ("configs", pa.int64()),  # distinct launch configs seen for the name; the fields above are the most common
    ("config_calls", pa.int64()),  # calls that used the reported config
    ("kernel_flop", pa.int64()),  # Inductor's estimate, summed over the calls that carry it
    ("kernel_num_gb", pa.float64()),
    ("flop_per_s", pa.float64()),
    ("gb_per_s", pa.float64()),
    ("bytes", pa.int64()),  # memcpy / memset bytes moved, summed
])
KERNELS = pa.schema([
    ("name", pa.string()), ("category", pa.string()), ("calls", pa.int64()), ("total_ns", pa.int64()),
    ("avg_ns", pa.int64()), ("min_ns", pa.int64()), ("max_ns", pa.int64()), ("p50_ns", pa.int64()),
    ("p95_ns", pa.int64()), ("device_pct", pa.float64()), ("top_ops", pa.list_(TOP_OP)), ("launch", LAUNCH),
])


@dataclass
class KernelTable:
    """A run's kernel rows (schema KERNELS, by total time), its device total and category breakdown."""

    table: pa.Table
    device_total_ns: int
    categories: list[KernelCategory]
    work: dict[str, OpWork] = field(default_factory=dict)  # per name, from its ops' shapes (explorer.views.rates)
    rates: RatesBasis | None = None  # what `work`'s rates compare with


DEFAULT_KERNEL_SORT = "-total_ns"  # the kernels table, page, JSON twin, notebook and CLI: most device time first

def categorize(names: pa.Array, cats: pa.Array) -> pa.Array:
    """The CATEGORY_RULES category of each (name, event category) pair, vectorised per rule."""
    lower_cats = pc.utf8_lower(cats)
    out = pa.nulls(len(names), pa.string())
    for rule in CATEGORY_RULES:
        hit = pa.array(np.ones(len(names), dtype=bool))
        if rule.cats:
            hit = pc.and_(hit, pc.is_in(lower_cats, value_set=pa.array(sorted(rule.cats))))
        if rule.name:
            hit = pc.and_(hit, pc.match_substring_regex(names, rule.name, ignore_case=True))
        out = pc.if_else(pc.and_(pc.is_null(out), pc.fill_null(hit, False)), rule.category, out)
    return out


def compute_kernel_table(slices: pa.Table, device_args: pa.Array | pa.ChunkedArray | None = None) -> KernelTable:
    """Per execution name over the `device_time` slices. `device_args` is the args text of those
    slices in slice order (None: no launch parameters).

    calls, total/min/max are exact; avg_ns = total_ns // calls (floor). pNN_ns is the nearest-rank
    percentile: the value at 1-based rank ceil(NN * calls / 100) of the name's sorted durations (p50 of
    [1, 2, 3, 4] is 2, p95 is 4). device_pct = 100 * total_ns / all device time of the run. A name's
    category comes from its first execution's event category. top_ops: the framework ops (op_id,
    ProfilerStep#N as ProfilerStep*) that launched it, top 3 by summed time, name breaking ties.
    """
    dev_mask = slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
    dev = slices.filter(pa.array(dev_mask))
    device_total = int(dev.column("dur_ns").to_numpy().sum()) if dev.num_rows else 0
    if dev.num_rows == 0:
        return KernelTable(KERNELS.empty_table(), 0, [])
    encoded = pc.dictionary_encode(dev.column("name")).combine_chunks()
    names, code = encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    dur = dev.column("dur_ns").to_numpy().astype(np.int64)
    stats = _duration_stats(code, dur, len(names))
    _, first = np.unique(code, return_index=True)  # the first row of each name (codes are 0..n-1)
    category = categorize(names, dev.column("cat").take(pa.array(first)))
    pct = stats["total_ns"] * (100.0 / device_total) if device_total else np.zeros(len(names))
    top = _top_ops(slices, dev, code, dur, len(names))
    launch = _launch(names, code, dur, device_args)
    table = pa.table({"name": names, "category": category, **{k: pa.array(v) for k, v in stats.items()},
                      "device_pct": pa.array(pct, pa.float64()), "top_ops": top, "launch": launch}, schema=KERNELS)
    table = table.sort_by([("total_ns", "descending"), ("name", "ascending")])
    return KernelTable(table, device_total, _categories(table, device_total))


def _duration_stats(code: np.ndarray, dur: np.ndarray, n: int) -> dict[str, np.ndarray]:
    order = np.lexsort((dur, code))
    sorted_dur = dur[order]
    calls = np.bincount(code, minlength=n).astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(calls)[:-1])).astype(np.int64)
    total = np.add.reduceat(sorted_dur, starts).astype(np.int64)
    out = {"calls": calls, "total_ns": total, "avg_ns": total // calls, "min_ns": sorted_dur[starts],
           "max_ns": sorted_dur[starts + calls - 1]}
    for p in PERCENTILES:
        rank = (p * calls + 99) // 100  # ceil(p * calls / 100) in integers
        out[f"p{p}_ns"] = sorted_dur[starts + np.maximum(rank, 1) - 1]
    return out


def _top_ops(slices: pa.Table, dev: pa.Table, code: np.ndarray, dur: np.ndarray, n: int) -> pa.Array:
    op_id = dev.column("op_id").to_numpy().astype(np.int64)
    has = np.flatnonzero(op_id >= 0)
    op_names = pc.dictionary_encode(slices.column("name").take(pa.array(op_id[has]))).combine_chunks()
    keys = pa.array([op_key_name(str(v)) for v in op_names.dictionary.to_pylist()], pa.string())
    pairs = pa.table({"kernel": code[has], "op": keys.take(op_names.indices), "dur": dur[has]})
    g = pairs.group_by(["kernel", "op"], use_threads=False).aggregate([("dur", "sum")])
    g = g.sort_by([("kernel", "ascending"), ("dur_sum", "descending"), ("op", "ascending")])
    out: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for k, op, total in zip(g.column("kernel").to_pylist(), g.column("op").to_pylist(),
                            g.column("dur_sum").to_pylist(), strict=True):
        if len(out[k]) < TOP_OPS_PER_KERNEL:
            out[k].append({"name": op, "total_ns": int(total)})
    return pa.array(out, pa.list_(TOP_OP))


_ARG_FIELDS = {  # column -> (JSON path in the Kineto / Inductor args, SQL type)
    "grid": ('$.grid', "VARCHAR"),
    "block": ('$.block', "VARCHAR"),
    "regs": ('$."registers per thread"', "BIGINT"),
    "smem": ('$."shared memory"', "BIGINT"),
    "occ": ('$."est. achieved occupancy %"', "DOUBLE"),
    "flop": ('$.kernel_flop', "HUGEINT"),
    "gb": ('$.kernel_num_gb', "DOUBLE"),
    "bytes": ('$.bytes', "HUGEINT"),
}
_CONFIG = ("grid", "block", "regs", "smem", "occ")


def _launch_sql() -> str:
    fields = ", ".join(f"TRY_CAST(json_extract_string(a, '{path}') AS {typ}) AS {col}"
                       if typ != "VARCHAR" else f"CAST(json_extract(a, '{path}') AS VARCHAR) AS {col}"
                       for col, (path, typ) in _ARG_FIELDS.items())
    cfg = ", ".join(_CONFIG)
    return f"""
    WITH p AS (SELECT code, dur, {fields}
               FROM (SELECT code, dur, CASE WHEN json_valid(args) THEN args ELSE '{{}}' END AS a FROM dev)),
    cfg AS (SELECT code, {cfg}, count(*) AS n, sum(dur) AS t FROM p
            WHERE coalesce(grid, block, CAST(regs AS VARCHAR), CAST(smem AS VARCHAR), CAST(occ AS VARCHAR))
                  IS NOT NULL
            GROUP BY code, {cfg}),
    ranked AS (SELECT *, row_number() OVER (PARTITION BY code ORDER BY n DESC, t DESC, {cfg}) AS rk,
                      count(*) OVER (PARTITION BY code) AS configs FROM cfg),
    agg AS (SELECT code, sum(flop) AS flop, sum(CASE WHEN flop IS NOT NULL THEN dur END) AS flop_ns,
                   kahan_sum(gb) AS gb, sum(CASE WHEN gb IS NOT NULL THEN dur END) AS gb_ns,
                   sum(bytes) AS bytes, sum(CASE WHEN bytes IS NOT NULL THEN dur END) AS bytes_ns
            FROM p GROUP BY code)
    SELECT agg.*, {", ".join(f"r.{c}" for c in _CONFIG)}, r.configs, r.n AS config_calls
    FROM agg LEFT JOIN (SELECT * FROM ranked WHERE rk = 1) r USING (code) ORDER BY code"""


def _launch(names: pa.Array, code: np.ndarray, dur: np.ndarray,
            device_args: pa.Array | pa.ChunkedArray | None) -> pa.Array:
    """Launch parameters per name, with the args JSON read by DuckDB's JSON functions (no per-slice
    Python). The most common config (grid, block, registers, shared memory, occupancy) is reported,
    ties going to the one with more time. Rates: flop_per_s = sum(kernel_flop) / sum(dur) over the calls
    that carry kernel_flop; gb_per_s likewise from kernel_num_gb, else from bytes (memcpy / memset)."""
    empty = [None] * len(names)
    if device_args is None:
        return pa.array(empty, LAUNCH)
    con = duckdb.connect()
    try:
        con.register("dev", pa.table({"code": code, "dur": dur, "args": device_args}))
        rows = con.sql(_launch_sql()).to_arrow_table().to_pylist()
    finally:
        con.close()
    out: list[dict[str, Any] | None] = list(empty)
    for r in rows:
        out[int(r["code"])] = _launch_row(r)
    return pa.array(out, LAUNCH)


def _launch_row(r: dict[str, Any]) -> dict[str, Any] | None:
    flop, gb, nbytes = r["flop"], r["gb"], r["bytes"]
    row = {"grid": parse_int_list(r["grid"]), "block": parse_int_list(r["block"]), "registers_per_thread": r["regs"],
           "shared_memory": r["smem"], "est_occupancy_pct": r["occ"], "configs": r["configs"],
           "config_calls": r["config_calls"], "kernel_flop": None if flop is None else int(flop),
           "kernel_num_gb": gb, "flop_per_s": None, "gb_per_s": None,
           "bytes": None if nbytes is None else int(nbytes)}
    if flop is not None and r["flop_ns"]:
        row["flop_per_s"] = float(int(flop) * 1_000_000_000 / int(r["flop_ns"]))
    if gb is not None and r["gb_ns"]:
        row["gb_per_s"] = float(gb) * 1e9 / int(r["gb_ns"])
    elif nbytes is not None and r["bytes_ns"]:
        row["gb_per_s"] = int(nbytes) / int(r["bytes_ns"])  # bytes per ns is GB/s
    return row if any(v is not None for v in row.values()) else None


_INTS = re.compile(r"^\[\s*-?\d+(\s*,\s*-?\d+)*\s*\]$")


def parse_int_list(text: str | None) -> list[int] | None:
    """'[512,1,1]' -> [512, 1, 1]; anything that is not a list of integers -> None."""
    if text is None or not _INTS.match(text):
        return None
    return [int(v) for v in json.loads(text)]


def _categories(table: pa.Table, device_total: int) -> list[KernelCategory]:
    g = table.group_by("category", use_threads=False).aggregate([("calls", "sum"), ("total_ns", "sum")])
    rows: list[KernelCategory] = [{"category": c, "calls": int(n), "total_ns": int(t),
             "device_pct": 100.0 * int(t) / device_total if device_total else 0.0}
            for c, n, t in zip(g.column("category").to_pylist(), g.column("calls_sum").to_pylist(),
                               g.column("total_ns_sum").to_pylist(), strict=True)]
    return sorted(rows, key=lambda r: (-r["total_ns"], r["category"]))


def sort_kernel_rows(table: pa.Table, sort: str = DEFAULT_KERNEL_SORT, limit: int | None = None, q: str = "",
                     category: str = "") -> list[KernelRow]:
    """Filter (name substring, any case; exact category), sort (`-col` descending, `+col` ascending,
    a bare column descending unless it is text) and cut the kernel table into rows."""
    key = sort.lstrip("-+")
    if key not in KERNEL_COLUMNS:
        raise BadRequest(f"cannot sort by {sort!r}; columns: {', '.join(KERNEL_COLUMNS)}")
    if q:
        table = table.filter(pc.match_substring(table.column("name"), q, ignore_case=True))
    if category:
        table = table.filter(pc.equal(table.column("category"), category))
    table = table.sort_by([(key, "descending" if sort_descending(sort) else "ascending"), ("name", "ascending")])
    if limit is not None:
        table = table.slice(0, max(0, limit))
    rows: list[KernelRow] = table.to_pylist()
    return rows


def sort_descending(sort: str) -> bool:
    """`-col` descending, `+col` ascending, a bare column descending unless it is a text column."""
    return sort.startswith("-") or (sort.lstrip("-+") not in TEXT_COLUMNS and not sort.startswith("+"))
