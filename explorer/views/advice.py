"""The advice page family: a run's findings (explorer.analysis.advice) computed once for the findings page
`/runs/{id}/advice`, its twin `/api/runs/{id}/advice`, the overview's top findings, the CLI and the notebook."""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import pyarrow.parquet as pq

from explorer.analysis.advice import AdviceInputs, DeviceRecs, compute_advice
from explorer.analysis.advice.efficiency import WORK_OPS, op_work
from explorer.analysis.advice.peaks import first_input_type
from explorer.analysis.device.advice import compute_recommendations
from explorer.analysis.kernels import parse_int_list, sort_kernel_rows
from explorer.model.advice_shapes import AdviceResult, Finding, FindingChange, FindingRef
from explorer.model.ranks import rank_by_track
from explorer.model.shapes import RunJson
from explorer.runs.run import Run
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore
from explorer.views.device import compute_device_profiles, load_profile_tables
from explorer.views.links import run_json
from explorer.views.rates import run_device_model
from explorer.views.render import fmt_dur

OVERVIEW_FINDINGS = 3  # findings on the overview's first screen


def load_op_shapes(store: RunStore, run_id: str) -> dict[int, str]:
    """The ops' Kineto Input Dims text by slice id (the cached slice columns leave `shapes` out)."""
    t = pq.read_table(store.table_path(run_id, "slices"), columns=["slice_id", "shapes"],
                      filters=[("is_op", "=", True)])
    return {int(i): str(s) for i, s in zip(t.column("slice_id").to_pylist(), t.column("shapes").to_pylist(),
                                           strict=True) if s}


def device_recommendations(store: RunStore, run_id: str) -> list[DeviceRecs]:
    rec = store.require_ready(run_id)
    out = []
    for p in compute_device_profiles(store, rec)["profiles"]:
        out.append(DeviceRecs(p["name"], p["profile_id"],
                              compute_recommendations(load_profile_tables(store, run_id, p))))
    return out


def run_advice(run: Run) -> AdviceResult:
    """The `/api/runs/{id}/advice` object, computed once per run (the findings page, its twin, the overview and
    compare share it)."""
    return run.cached("advice", lambda: compute_run_advice(run))


def compute_run_advice(run: Run) -> AdviceResult:
    """The advisor over the run's tables and its cached breakdown, per-rank summary and kernels."""
    store, run_id, s, rec = run.store, run.id, run.summary, run.record
    ranks = run.ranks() if len(run.rank_ids()) > 1 else None
    dtypes, op_bytes = load_op_work(store, run_id)
    inputs = AdviceInputs(run_id, s.start_ns, s.span_ns, run.table("slices"), run.table("flows"),
                          load_op_shapes(store, run_id), run.breakdown(), _step_count(run), ranks,
                          device_recommendations(store, run_id), run_device_model(rec),
                          dtypes, sort_kernel_rows(run.kernels().table),
                          run_num_sms(rec), load_grid_blocks(store, run_id), op_bytes,
                          rank_by_track(run.table("tracks")))
    return compute_advice(inputs)


def run_num_sms(rec: RunRecord) -> int:
    """The SMs of the run's devices (Kineto deviceProperties' numSms): the smallest when they differ, 0 unknown."""
    counts = [d["numSms"] for f in rec.summary.files if isinstance(f.get("device_properties"), list)
              for d in f["device_properties"] if isinstance(d, dict) and isinstance(d.get("numSms"), int)
              and not isinstance(d.get("numSms"), bool) and d["numSms"] > 0]
    return min(counts) if counts else 0


def load_grid_blocks(store: RunStore, run_id: str) -> dict[int, int]:
    """Kernel slice id -> the blocks in its launch grid (the product of Kineto's `grid`), for the kernels whose
    args carry a grid of positive integers; DuckDB reads the args (no Python per kernel)."""
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT slice_id, CAST(json_extract(args, '$.grid') AS VARCHAR) FROM read_parquet(?) "
            "WHERE device_time AND json_valid(args) AND json_extract(args, '$.grid') IS NOT NULL",
            [str(store.table_path(run_id, "slices"))]).fetchall()
    finally:
        con.close()
    out: dict[int, int] = {}
    blocks: dict[str, int] = {}  # by grid text: a trace launches a few grids many times
    for sid, grid in rows:
        if grid not in blocks:
            dims = parse_int_list(grid)
            blocks[grid] = math.prod(dims) if dims and all(d > 0 for d in dims) else 0
        if blocks[grid]:
            out[int(sid)] = blocks[grid]
    return out


def load_op_work(store: RunStore, run_id: str) -> tuple[dict[int, str], dict[int, int]]:
    """By slice id, for the ops efficiency knows (GEMM, elementwise, ...), from their args (Kineto's `Input Dims`,
    `Input type`, `Concrete Inputs`): the first input's dtype (the GEMM table and the fusion floor read it) and the
    bytes one call moves (the host-only streaming model reads it; ops whose args do not say are left out). DuckDB
    pulls the three fields out of the args; each distinct (name, fields) is worked out once."""
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT slice_id, name, CAST(json_extract(args, '$.\"Input Dims\"') AS VARCHAR), "
            "CAST(json_extract(args, '$.\"Input type\"') AS VARCHAR), "
            "CAST(json_extract(args, '$.\"Concrete Inputs\"') AS VARCHAR) FROM read_parquet(?) "
            "WHERE is_op AND list_contains(?, name) AND json_valid(args)",
            [str(store.table_path(run_id, "slices")), list(WORK_OPS)]).fetchall()
    finally:
        con.close()
    dtypes: dict[int, str] = {}
    moved: dict[int, int] = {}
    known: dict[tuple[str, str, str, str], tuple[str, int | None]] = {}
    for sid, name, dims, types, concrete in rows:
        key = (str(name), dims or "null", types or "null", concrete or "null")
        if key not in known:
            args = f'{{"Input Dims": {key[1]}, "Input type": {key[2]}, "Concrete Inputs": {key[3]}}}'
            work = op_work(key[0], args)
            known[key] = (first_input_type(args), None if work is None else work.bytes)
        dtype, nbytes = known[key]
        dtypes[int(sid)] = dtype
        if nbytes is not None:
            moved[int(sid)] = nbytes
    return dtypes, moved


def _step_count(run: Run) -> int:
    """Steps per rank (ProfilerStep#N ranges): a saving over the trace divided by it is a saving per step."""
    steps = run.steps()
    return steps["count"] // max(len(steps["ranks"]), 1)


@dataclass
class AdvicePage:
    """`/runs/{id}/advice`; twin `/api/runs/{id}/advice`."""

    run: RunJson
    advice: AdviceResult
    twin: str = ""


def build_advice_page(run: Run) -> AdvicePage:
    return AdvicePage(run_json(run.record), run_advice(run), f"/api/runs/{run.id}/advice")


def fact_text(value: int, unit: str) -> str:
    """A fact's number as the pages, the CLI and the report show it."""
    if unit == "ns":
        return fmt_dur(value)
    if unit == "bytes":
        return f"{value:,} B"
    if unit == "ppm":
        return f"{value / 10_000:.1f} %"
    if unit == "bytes_per_s":
        return f"{value / 10**9:,.1f} GB/s"
    return f"{value:,}"


def saving_text(f: Finding, span_ns: int) -> str:
    """`1.2 ms (12.3 % of the span)`, or `not timed`."""
    if f["saving_ns"] is None:
        return "not timed"
    return f"{fmt_dur(f['saving_ns'])} ({100 * f['saving_ns'] / max(span_ns, 1):.1f} % of the profiled span)"


def _md(text: str) -> str:
    """Trace names in Markdown: markup characters escaped, one line."""
    return "".join("\\" + c if c in "\\`*_[]<>|#" else c for c in text).replace("\n", " ")


def advice_markdown(advice: AdviceResult, run_name: str, base_url: str = "") -> str:
    """The findings as Markdown for a pull-request comment: a table ranked by saving, then each finding's fix,
    formula and evidence links (absolute when `base_url` is given)."""
    lines = [f"### Trace Explorer advice: {_md(run_name)}", ""]
    if not advice["findings"]:
        return "\n".join([*lines, "No finding: none of the rules fired on this run.", ""])
    lines += ["| # | finding | expected saving | confidence | effort |", "|---:|---|---:|---|---|"]
    for n, f in enumerate(advice["findings"], 1):
        lines.append(f"| {n} | {_md(f['title'])} | {saving_text(f, advice['span_ns'])} | {f['confidence']} | "
                     f"{f['effort']} |")
    for n, f in enumerate(advice["findings"], 1):
        facts = "; ".join(f"{_md(x['label'])} {fact_text(x['value'], x['unit'])}" for x in f["facts"])
        links = ", ".join(f"[{_md(e['label'])}]({base_url}{e['path']})" for e in f["evidence"])
        lines += ["", f"**{n}. {_md(f['title'])}** (`{f['rule']}`)", "", f"- symptom: {_md(f['symptom'])} {facts}",
                  f"- fix: {_md(f['fix'])}", f"- saving: {saving_text(f, advice['span_ns'])} = {_md(f['formula'])}",
                  f"- evidence: {links}"]
    if advice["not_listed"]:
        lines += ["", f"{advice['not_listed']} more findings would save under {fmt_dur(advice['min_saving_ns'])} each: "
                  "not listed."]
    return "\n".join(lines) + "\n"


def compare_findings(baseline: AdviceResult, other: AdviceResult) -> FindingChange:
    """What `other`'s findings gained and lost against the baseline's (a finding is its rule and title)."""
    def refs(a: AdviceResult) -> dict[tuple[str, str], FindingRef]:
        return {(f["rule"], f["title"]): {"rule": f["rule"], "title": f["title"], "saving_ns": f["saving_ns"]}
                for f in a["findings"]}

    b, o = refs(baseline), refs(other)
    return {"run_id": other["run_id"], "appeared": [v for k, v in o.items() if k not in b],
            "disappeared": [v for k, v in b.items() if k not in o]}
