"""Fusion rules: unfused attention (softmax between two matmuls on [B, H, Lq, Lk]) and unfused elementwise
chains (three or more elementwise / reduction ops on the same rows, run back to back by one caller: RMSNorm,
LayerNorm, GELU, SiLU, softmax written by hand). Ops inside another aten op are already someone's fused call
and are left alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.analysis.advice.efficiency import DTYPE_SIZE, numel
from explorer.analysis.advice.finding import Context, fact, make_finding, page_link, timeline_link
from explorer.analysis.advice.ops import ELEMENTWISE, OpSeq, base_name, largest_shape, parse_shapes, rows_key
from explorer.model.advice_shapes import Finding

# views and bookkeeping that neither break a chain nor count in its time
TRANSPARENT = frozenset({
    "view", "reshape", "_reshape_alias", "expand", "unsqueeze", "squeeze", "transpose", "t", "permute", "detach",
    "slice", "select", "as_strided", "alias", "_unsafe_view", "to", "_to_copy", "empty", "empty_like",
    "lift_fresh", "result_type", "contiguous", "scalar_tensor", "resolve_conj", "resolve_neg",
})
MATMUL = frozenset({"matmul", "bmm", "baddbmm", "einsum", "mm"})
SOFTMAX = frozenset({"softmax", "_softmax", "_safe_softmax", "safe_softmax"})
MIN_CHAIN = 3
ATTN_LOOK = 5  # siblings looked at on each side of a softmax for its two matmuls


def fused_caller(parent_name: str) -> bool:
    return parent_name.startswith("aten::")


@dataclass
class Group:
    """Occurrences of one chain (or attention) signature, summed over the trace."""

    names: tuple[str, ...]
    shape: list[int]
    parent: str = ""
    count: int = 0
    time_ns: int = 0
    kept_ns: int = 0  # the part the fused call still costs, by the rule's formula
    first: tuple[int, int] = (0, 0)  # relative start/end of the first occurrence
    slice_ids: list[int] = field(default_factory=list)
    bytes: int = 0  # the fused kernel's bytes (a known device's chains whose dtype is known), summed
    floor_ns: int = 0  # those bytes at the device's memory bandwidth, summed
    floors: int = 0  # occurrences with a bandwidth floor


@dataclass(frozen=True)
class Bandwidth:
    """A known device's memory bandwidth (bytes/s) and model, for the fusion floor; `dtypes` the ops' first
    input dtype by slice id."""

    bytes_per_s: int
    model: str
    dtypes: dict[int, str]


def compute_fusion_findings(ops: OpSeq, ctx: Context, bw: Bandwidth | None = None,
                            reason: str = "no device bandwidth") -> list[Finding]:
    """`bw` None (host-only run, unknown device or bandwidth; `reason` says which): the chains' saving keeps each
    one's slowest op."""
    used: set[int] = set()
    out = [_attention_finding(ctx, ops, g) for g in _attention_groups(ops, ctx, used).values()]
    out += [_chain_finding(ctx, ops, g, bw, reason) for g in _chain_groups(ops, ctx, used, bw).values()]
    return out


def chain_bytes(ops: OpSeq, part: list[int], dtypes: dict[int, str]) -> int | None:
    """Bytes a fused kernel of the chain moves: each distinct input shape of more than one element once (the
    trace names no tensors, so equal shapes count once and an intermediate the chain made counts too) and the
    last op's output (its largest input shape), at the first op's dtype; None for an unknown dtype."""
    size = DTYPE_SIZE.get(dtypes.get(int(ops.slice_id[part[0]]), ""))
    if size is None:
        return None
    shapes = {tuple(s) for j in part for s in parse_shapes(ops.shapes[j]) if numel(s) > 1}
    return (sum(numel(list(s)) for s in shapes) + numel(largest_shape(ops.shapes[part[-1]]))) * size


def _attention_groups(ops: OpSeq, ctx: Context, used: set[int]) -> dict[tuple[object, ...], Group]:
    groups: dict[tuple[object, ...], Group] = {}
    for i in range(len(ops)):
        if base_name(ops.names[i]) not in SOFTMAX or fused_caller(ops.parent_names[i]):
            continue
        shape = largest_shape(ops.shapes[i])
        before = _near_matmul(ops, i, -1)
        after = _near_matmul(ops, i, 1)
        if len(shape) < 3 or before is None or after is None:
            continue
        span = range(before, after + 1)
        names = tuple(base_name(ops.names[j]) for j in span if base_name(ops.names[j]) not in TRANSPARENT)
        g = groups.setdefault((names, tuple(shape)), Group(names, shape))
        between = sum(int(ops.time[j]) for j in range(before + 1, after) if base_name(ops.names[j]) not in TRANSPARENT)
        _add(g, ops, ctx, list(span), kept=int(ops.time[before]) + int(ops.time[after]),
             total=int(ops.time[before]) + int(ops.time[after]) + between)
        used.update(int(ops.slice_id[j]) for j in span)
    return groups


def _near_matmul(ops: OpSeq, i: int, step: int) -> int | None:
    j = i + step
    while 0 <= j < len(ops) and abs(j - i) <= ATTN_LOOK and ops.same_group(i, j):
        name = base_name(ops.names[j])
        if name in MATMUL:
            return j
        if name not in ELEMENTWISE and name not in TRANSPARENT:
            return None
        j += step
    return None


def _chain_groups(ops: OpSeq, ctx: Context, used: set[int], bw: Bandwidth | None) -> dict[tuple[object, ...], Group]:
    groups: dict[tuple[object, ...], Group] = {}
    run: list[int] = []
    key: tuple[int, ...] | None = None
    for i in range(len(ops) + 1):
        name = base_name(ops.names[i]) if i < len(ops) else ""
        if i < len(ops) and name in TRANSPARENT and run and ops.same_group(run[-1], i):
            continue
        k = rows_key(ops.shapes[i]) if i < len(ops) and name in ELEMENTWISE else None
        joins = (k is not None and run and k == key and ops.same_group(run[-1], i)
                 and int(ops.slice_id[i]) not in used and not fused_caller(ops.parent_names[i]))
        if joins:
            run.append(i)
            continue
        for part in _periods(run, ops) if len(run) >= MIN_CHAIN else []:
            names = tuple(base_name(ops.names[j]) for j in part)
            shape = max((largest_shape(ops.shapes[j]) for j in part), key=len)
            parent = ops.parent_names[part[0]]
            g = groups.setdefault((names, key, parent), Group(names, shape, parent))
            times = [int(ops.time[j]) for j in part]
            nbytes = chain_bytes(ops, part, bw.dtypes) if bw is not None else None
            floor = 0
            if bw is not None and nbytes is not None:
                floor = -(-nbytes * 10**9 // bw.bytes_per_s)  # ceil: a floor never rounds down
                g.bytes, g.floor_ns, g.floors = g.bytes + nbytes, g.floor_ns + floor, g.floors + 1
            _add(g, ops, ctx, part, kept=min(max(max(times), floor), sum(times)), total=sum(times))
        starts = (k is not None and int(ops.slice_id[i]) not in used and not fused_caller(ops.parent_names[i]))
        run, key = ([i], k) if starts else ([], None)
    return groups


def _periods(run: list[int], ops: OpSeq) -> list[list[int]]:
    """A chain that is one sequence of ops repeated (a norm called three times in a row) as its repetitions: each
    call fuses into a kernel of its own, so each is an occurrence."""
    names = [ops.names[j] for j in run]
    for p in range(MIN_CHAIN, len(run) // 2 + 1):
        if len(run) % p == 0 and all(names[i] == names[i % p] for i in range(len(run))):
            return [run[i:i + p] for i in range(0, len(run), p)]
    return [run]


def _add(g: Group, ops: OpSeq, ctx: Context, members: list[int], kept: int, total: int) -> None:
    if not g.count:
        g.first = (int(ops.ts[members[0]]) - ctx.origin_ns,
                   max(int(ops.ts[j] + ops.dur[j]) for j in members) - ctx.origin_ns)
        g.slice_ids = [int(ops.slice_id[j]) for j in members]
    g.count += 1
    g.time_ns += total
    g.kept_ns += kept


def _what(names: tuple[str, ...], parent: str) -> tuple[str, str]:
    """What a chain looks like, and its fused call."""
    s = set(names)
    if parent.startswith("Optimizer."):  # torch names the range Optimizer.step#SGD.step
        opt = parent.split("#", 1)[1].split(".", 1)[0] if "#" in parent else "AdamW"
        return "optimizer update", f"the optimizer's multi-tensor or fused form: torch.optim.{opt}(params, ..., " \
            "foreach=True), or fused=True where the optimizer has it"
    if {"mean", "rsqrt"} <= s or ({"mean", "sqrt"} <= s and "sub" not in s):
        return "RMSNorm", "torch.nn.functional.rms_norm(x, (hidden,), weight, eps) (or torch.compile the module)"
    if "mean" in s and "sub" in s and s & {"sqrt", "rsqrt", "var"}:
        return "LayerNorm", "torch.nn.functional.layer_norm(x, (hidden,), weight, bias, eps)"
    if s & {"tanh", "erf"} and "mul" in s:
        return "GELU", "torch.nn.functional.gelu(x, approximate='tanh') (or 'none' for the erf form)"
    if "exp" in s and "sum" in s:
        return "softmax", "torch.softmax(x, dim=-1)"
    if "sigmoid" in s and "mul" in s:
        return "SiLU", "torch.nn.functional.silu(x)"
    return "", "torch.compile the function that holds these ops, so Inductor fuses them into one kernel"


def _chain_finding(ctx: Context, ops: OpSeq, g: Group, bw: Bandwidth | None, reason: str) -> Finding:
    what, call = _what(g.names, g.parent)
    facts = [fact("occurrences", g.count, "count"), fact("ops per occurrence", len(g.names), "count"),
             fact(f"chain {'device' if ops.device_basis else 'CPU'} time", g.time_ns)]
    if bw is not None and g.floors:
        facts += [fact("bytes one fused kernel per occurrence moves, summed", g.bytes, "bytes"),
                  fact(f"those bytes at the {bw.model}'s memory bandwidth", g.floor_ns)]
    facts.append(fact("time a fused kernel keeps, summed", g.kept_ns))
    basis = "device" if ops.device_basis else "CPU"
    title = f"Fuse the {what}" if what == "optimizer update" else (f"Fuse the hand-written {what}" if what else "Fuse the elementwise chain")
    return make_finding(
        ctx, "unfused-elementwise", f"{title}: {len(g.names)} ops on {g.shape} into one call",
        f"{' → '.join(g.names)} run one after another on the same rows, {g.count} times; each op is a separate "
        f"pass over memory ({basis} time).",
        facts,
        [timeline_link(ctx, "first occurrence", *g.first),
         page_link(ctx, "ops", "op table, by shape", "ops", by_shape="1")],
        f"Replace the chain with {call}.", g.time_ns - g.kept_ns, g.time_ns, _chain_formula(bw, g, reason), "medium",
        "small")


def _chain_formula(bw: Bandwidth | None, g: Group, reason: str) -> str:
    if bw is not None and g.floors:
        return (f"Σ over occurrences of (chain time − max(bytes floor, slowest op)); bytes floor = (the chain's distinct "
                f"input shapes + its output) × dtype size / the {bw.model}'s memory bandwidth "
                f"({bw.bytes_per_s // 10**9:,} GB/s): a fused kernel reads its inputs and writes its output once, and "
                "is no faster than the chain's largest single pass")
    why = "the chain's dtype is not recorded (Input type)" if bw is not None else reason
    return ("chain time − slowest op per occurrence (a fused kernel makes one pass, about the cost of the chain's "
            f"largest single pass), summed over occurrences; no bytes-at-bandwidth floor: {why}")


def _attention_finding(ctx: Context, ops: OpSeq, g: Group) -> Finding:
    basis = "device" if ops.device_basis else "CPU"
    return make_finding(
        ctx, "unfused-attention", f"Use fused attention: softmax between two matmuls on {g.shape}",
        f"Attention is written out ({' → '.join(g.names)}), {g.count} times: the {g.shape} score matrix is "
        f"written and read back by every op between the two matmuls ({basis} time).",
        [fact("occurrences", g.count, "count"), fact(f"attention {basis} time", g.time_ns),
         fact("the two matmuls", g.kept_ns), fact("ops between them", g.time_ns - g.kept_ns)],
        [timeline_link(ctx, "first occurrence", *g.first),
         page_link(ctx, "ops", "op table, by shape", "ops", by_shape="1")],
        "Replace matmul → scale/mask → softmax → matmul with "
        "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...).",
        g.time_ns - g.kept_ns, g.time_ns,
        "time of the ops between the two matmuls (scale, mask, softmax, dropout), which a fused attention kernel "
        "does without the score matrix round trip; the matmuls' time is kept", "medium", "small")
