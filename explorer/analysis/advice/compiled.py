"""The torch.compile rule: recompilations and graph breaks where the trace shows them. Dynamo names its work
`entire_frame_compile` (older torch: `_compile.compile_inner`), tags it `compile_id=F/C` (frame F, its C-th
compile: C >= 1 is a recompilation) and runs the result as `Torch-Compiled Region: F/C`; a region that runs inside
another is a frame resumed after a graph break. docs/advice.md gives the formulas."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.advice.finding import Context, fact, make_finding, timeline_link
from explorer.analysis.advice.ops import nearest_ancestor
from explorer.model.advice_shapes import Finding

I64 = np.int64
COMPILE = re.compile(r"^(entire_frame_compile|_compile\.(<locals>\.)?compile_inner)( \(dynamo_timed\))?$")
COMPILE_ID = re.compile(r"compile_id=(\d+)/(\d+)")
REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
RULE = "torch-compile-recompiles"


def torch_compile_findings(ctx: Context, slices: pa.Table) -> list[Finding]:
    names = slices.column("name")
    regex = "|".join(f"(?:{p.pattern})" for p in (COMPILE, COMPILE_ID, REGION))
    idx = np.flatnonzero(np.asarray(pc.fill_null(pc.match_substring_regex(names, regex), False)
                                    .to_numpy(zero_copy_only=False), bool))
    if not len(idx):
        return []
    text = [str(v) for v in names.take(pa.array(idx, pa.int64())).to_pylist()]
    n = slices.num_rows
    parent = slices.column("parent_id").to_numpy().astype(I64)
    is_compile, is_region = np.zeros(n, bool), np.zeros(n, bool)
    region_id: dict[int, tuple[int, int]] = {}
    for i, t in zip(idx.tolist(), text, strict=True):
        if COMPILE.match(t):
            is_compile[i] = True
        elif m := REGION.match(t):
            is_region[i] = True
            region_id[i] = (int(m.group(1)), int(m.group(2)))
    compiles = np.flatnonzero(is_compile)
    outer = compiles[nearest_ancestor(parent, compiles, is_compile) < 0]
    compile_id: dict[int, tuple[int, int]] = {}
    tagged = [(i, m) for i, t in zip(idx.tolist(), text, strict=True) if not is_compile[i] and not is_region[i]
              for m in [COMPILE_ID.search(t)] if m]
    if tagged:  # the tag sits under the compile it names
        owners = nearest_ancestor(parent, np.asarray([i for i, _ in tagged], I64), is_compile)
        for o, (_, m) in zip(owners.tolist(), tagged, strict=True):
            if o >= 0:
                top = o
                while parent[top] >= 0 and is_compile[parent[top]]:
                    top = int(parent[top])
                compile_id.setdefault(top, (int(m.group(1)), int(m.group(2))))
    out = _recompiles(ctx, slices, outer, compile_id)
    regions = np.asarray(sorted(region_id), I64)
    nested = regions[nearest_ancestor(parent, regions, is_region) >= 0] if len(regions) else regions
    return out + _graph_breaks(ctx, slices, regions, nested, region_id)


def _recompiles(ctx: Context, slices: pa.Table, outer: np.ndarray, ids: dict[int, tuple[int, int]]) -> list[Finding]:
    re_ = [int(i) for i in outer if ids.get(int(i), (0, 0))[1] >= 1]
    if not re_:
        return []
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    total = int(dur[re_].sum())
    frames = sorted({ids[i][0] for i in re_})
    first = min(re_, key=lambda i: int(ts[i]))
    labels = ", ".join(f"{ids[i][0]}/{ids[i][1]}" for i in sorted(re_, key=lambda i: int(ts[i]))[:6])
    return [make_finding(
        ctx, RULE, f"torch.compile recompiled {len(re_)} time{'s' if len(re_) != 1 else ''} inside the profile",
        f"Dynamo compiled frames again (compile ids {labels}{', …' if len(re_) > 6 else ''}): a guard failed, most "
        "often an input shape, a dtype or a Python scalar that changes between calls. Each recompilation stalls "
        "the step for the whole compile.",
        [fact("compilations in the profile", len(outer), "count"), fact("recompilations (compile id F/C, C ≥ 1)",
                                                                       len(re_), "count"),
         fact("frames recompiled", len(frames), "count"), fact("time in the recompilations", total)],
        [timeline_link(ctx, "first recompilation", int(ts[first]) - ctx.origin_ns,
                       int(ts[first] + dur[first]) - ctx.origin_ns)],
        "Find the failing guard with TORCH_LOGS=recompiles; mark the changing dimension dynamic "
        "(torch._dynamo.mark_dynamic(x, 0) or torch.compile(..., dynamic=True)), pad or bucket shapes, and pass "
        "changing Python numbers as tensors.",
        total, total, "time in the outermost compile events whose compile id is F/C with C ≥ 1 (recompilations of "
        "a frame already compiled); the first compile of each frame is left out", "medium", "small")]


def _graph_breaks(ctx: Context, slices: pa.Table, regions: np.ndarray, nested: np.ndarray,
                  ids: dict[int, tuple[int, int]]) -> list[Finding]:
    if not len(nested):
        return []
    dur = slices.column("dur_ns").to_numpy().astype(I64)
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    frames = sorted({ids[int(i)][0] for i in nested})
    first = int(nested[np.argmin(ts[nested])])
    return [make_finding(
        ctx, RULE, f"torch.compile graph breaks: {len(frames)} frame{'s' if len(frames) != 1 else ''} resumed after a "
        "break",
        "Compiled regions run inside other compiled regions: Dynamo stopped the graph (a graph break), ran Python "
        "eagerly and resumed in a new frame, so the function runs as several graphs with eager code between them "
        "and no fusion across the break.",
        [fact("compiled regions run", len(regions), "count"), fact("regions run after a graph break", len(nested),
                                                                   "count"),
         fact("resumed frames", len(frames), "count"), fact("time in the resumed regions", int(dur[nested].sum()))],
        [timeline_link(ctx, "first region after a break", int(ts[first]) - ctx.origin_ns,
                       int(ts[first] + dur[first]) - ctx.origin_ns)],
        "List the breaks with TORCH_LOGS=graph_breaks or torch._dynamo.explain(fn)(*args); replace data-dependent "
        "Python control flow (if x.sum() > 0, .item(), .tolist()) with torch.where / torch.cond, and use "
        "torch.compile(..., fullgraph=True) to make a break an error.",
        None, int(dur[nested].sum()), "not timed: the eager code between graphs and the lost fusion do not show as "
        "one interval", "medium", "medium")]
