"""Fusion rules: unfused attention (softmax between two matmuls on [B, H, Lq, Lk]) and unfused elementwise
chains (three or more elementwise / reduction ops on the same rows, run back to back by one caller: RMSNorm,
LayerNorm, GELU, SiLU, softmax written by hand). Ops inside another aten op are already someone's fused call
and are left alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.analysis.advice.efficiency import DTYPE_SIZE, numel
from explorer.analysis.advice.finding import Context, fact, make_finding, page_link, timeline_link
from explorer.analysis.advice.ops import ELEMENTWISE, OpSeq, base_name, largest_shape, parse_shapes, rows_key
from explorer.model.advice_shapes import Fact, Finding

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
    streamed: int = 0  # host-only occurrences priced by the streaming model (every op's bytes known)
    moved: int = 0  # bytes the chain's ops (attention: the ops between the matmuls) move, summed over those
    fused: int = 0  # bytes one fused call moves, summed over those (attention: 0, the score matrix stays on chip)
    rates: list[int] = field(default_factory=list)  # each streamed occurrence's best rate, bytes/s


@dataclass(frozen=True)
class OpBytes:
    """Bytes one call of each op moves (explorer.analysis.advice.efficiency.op_work), by slice id, and the ops'
    first input dtype: what the host-only streaming model reads."""

    by_slice: dict[int, int]
    dtypes: dict[int, str]


@dataclass(frozen=True)
class Bandwidth:
    """A known device's memory bandwidth (bytes/s) and model, for the fusion floor; `dtypes` the ops' first
    input dtype by slice id."""

    bytes_per_s: int
    model: str
    dtypes: dict[int, str]


def compute_fusion_findings(ops: OpSeq, ctx: Context, bw: Bandwidth | None = None,
                            reason: str = "no device bandwidth", work: OpBytes | None = None) -> list[Finding]:
    """`bw` None (host-only run, unknown device or bandwidth; `reason` says which): the chains' saving keeps each
    one's slowest op. On a host-only run whose ops' bytes are known (`work`), the streaming model prices them
    instead (streaming_saving)."""
    used: set[int] = set()
    host = None if ops.device_basis else work
    out = [_attention_finding(ctx, ops, g) for g in _attention_groups(ops, ctx, used, host).values()]
    out += [_chain_finding(ctx, ops, g, bw, reason) for g in _chain_groups(ops, ctx, used, bw, host).values()]
    return out


def streaming_saving(times: list[int], moved: list[int], fused: int) -> tuple[int, int, int] | None:
    """The host-only model: a CPU op's time is its memory traffic at the rate the chain's fastest-streaming op
    reached plus arithmetic; a fused call keeps the arithmetic and moves `fused` bytes once, so it saves the
    traffic the separate ops add: (Σ bytes moved − fused bytes) × t / b of the op with the highest b / t, at most
    the ops' time. Returns (saving ns, that op's bytes, its ns); None when no op moved bytes in measurable time."""
    best = -1
    for i, (t, b) in enumerate(zip(times, moved, strict=True)):
        if t > 0 and b > 0 and (best < 0 or b * times[best] > moved[best] * t):
            best = i
    if best < 0:
        return None
    extra = max(sum(moved) - fused, 0)
    return min(extra * times[best] // moved[best], sum(times)), moved[best], times[best]


def chain_bytes(ops: OpSeq, part: list[int], dtypes: dict[int, str]) -> int | None:
    """Bytes a fused kernel of the chain moves: each distinct input shape of more than one element once (the
    trace names no tensors, so equal shapes count once and an intermediate the chain made counts too) and the
    last op's output (its largest input shape), at the first op's dtype; None for an unknown dtype."""
    size = DTYPE_SIZE.get(dtypes.get(int(ops.slice_id[part[0]]), ""))
    if size is None:
        return None
    shapes = {tuple(s) for j in part for s in parse_shapes(ops.shapes[j]) if numel(s) > 1}
    return (sum(numel(list(s)) for s in shapes) + numel(largest_shape(ops.shapes[part[-1]]))) * size


def _attention_groups(ops: OpSeq, ctx: Context, used: set[int], host: OpBytes | None) -> dict[tuple[object, ...], Group]:
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
        inner = [j for j in range(before + 1, after) if base_name(ops.names[j]) not in TRANSPARENT]
        between = sum(int(ops.time[j]) for j in inner)
        kept = int(ops.time[before]) + int(ops.time[after])
        priced = _stream(g, ops, inner, host, fused=0)
        _add(g, ops, ctx, list(span), kept=kept + (between - priced if priced is not None else 0),
             total=kept + between)
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


def _chain_groups(ops: OpSeq, ctx: Context, used: set[int], bw: Bandwidth | None,
                  host: OpBytes | None) -> dict[tuple[object, ...], Group]:
    groups: dict[tuple[object, ...], Group] = {}
    run: list[int] = []
    key: tuple[int, ...] | None = None
    n = len(ops)
    for i in range(n + 1):
        name = base_name(ops.names[i]) if i < n else ""
        if i < n and name in TRANSPARENT and run and ops.same_group(run[-1], i):
            continue
        k = rows_key(ops.shapes[i]) if i < n and name in ELEMENTWISE else None
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
            fused = chain_bytes(ops, part, host.dtypes) if host is not None else None
            priced = _stream(g, ops, part, host, fused) if fused is not None else None
            if priced is not None:  # equal shapes count once in `fused` (the trace names no tensors): where they
                priced = min(priced, sum(times) - max(times))  # were distinct, the slowest-op model bounds it
            kept = sum(times) - priced if priced is not None else min(max(max(times), floor), sum(times))
            _add(g, ops, ctx, part, kept=kept, total=sum(times))
        starts = (k is not None and int(ops.slice_id[i]) not in used and not fused_caller(ops.parent_names[i]))
        run, key = ([i], k) if starts else ([], None)
    return groups


def _stream(g: Group, ops: OpSeq, members: list[int], host: OpBytes | None, fused: int) -> int | None:
    """The streaming model's saving for one occurrence (recorded on `g`), or None when it does not apply: a
    device run, or an op whose bytes the trace does not say."""
    if host is None or not members:
        return None
    moved = [host.by_slice.get(int(ops.slice_id[j])) for j in members]
    if any(b is None for b in moved):
        return None
    known = [b for b in moved if b is not None]
    priced = streaming_saving([int(ops.time[j]) for j in members], known, fused)
    if priced is None:
        return None
    saving, b, t = priced
    g.streamed, g.moved, g.fused = g.streamed + 1, g.moved + sum(known), g.fused + fused
    g.rates.append(b * 10**9 // t)
    return saving


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


def _what(names: tuple[str, ...], parent: str, host: bool = False) -> tuple[str, str]:
    """What a chain looks like, and its fused call (`host`: a host-only run, where F.rms_norm is no fused call)."""
    s = set(names)
    if parent.startswith("Optimizer."):  # torch names the range Optimizer.step#SGD.step
        opt = parent.split("#", 1)[1].split(".", 1)[0] if "#" in parent else "AdamW"
        return "optimizer update", f"the optimizer's multi-tensor or fused form: torch.optim.{opt}(params, ..., " \
            "foreach=True), or fused=True where the optimizer has it"
    if {"mean", "rsqrt"} <= s or ({"mean", "sqrt"} <= s and "sub" not in s):
        if host:  # aten::_fused_rms_norm on the CPU runs pow, mean, add, rsqrt and mul as separate ops
            return "RMSNorm", ("torch.compile on the module or function (Inductor fuses the chain into one C++ loop "
                               "nest; on the CPU, torch.nn.functional.rms_norm runs the same ops one by one, and on "
                               "a GPU it is one fused kernel)")
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


def _stream_facts(g: Group, what: str) -> list[Fact]:
    if not g.streamed:
        return []
    return [fact(f"bytes {what} move, summed", g.moved, "bytes"),
            fact("bytes one fused call moves, summed", g.fused, "bytes"),
            fact("the fastest-streaming op's rate (median over occurrences)", sorted(g.rates)[len(g.rates) // 2],
                 "bytes_per_s")]


def _chain_finding(ctx: Context, ops: OpSeq, g: Group, bw: Bandwidth | None, reason: str) -> Finding:
    what, call = _what(g.names, g.parent, host=not ops.device_basis)
    facts = [fact("occurrences", g.count, "count"), fact("ops per occurrence", len(g.names), "count"),
             fact(f"chain {'device' if ops.device_basis else 'CPU'} time", g.time_ns)]
    if bw is not None and g.floors:
        facts += [fact("bytes one fused kernel per occurrence moves, summed", g.bytes, "bytes"),
                  fact(f"those bytes at the {bw.model}'s memory bandwidth", g.floor_ns)]
    facts += _stream_facts(g, "the chain's ops")
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


STREAM_FORMULA = (
    "(bytes {what} move − bytes one fused call moves) × t ÷ b of the op that streamed fastest (the highest bytes "
    "b per time t among them), summed over occurrences: on a host-only run each op costs its memory traffic at "
    "that rate plus arithmetic, and a fused call keeps the arithmetic{fused}")


def _partial(g: Group, fallback: str) -> str:
    return "" if g.streamed == g.count else (
        f"; {g.count - g.streamed} of {g.count} occurrences lack an op's bytes (Input Dims / Input type): {fallback}")


def _chain_formula(bw: Bandwidth | None, g: Group, reason: str) -> str:
    if g.streamed:
        return STREAM_FORMULA.format(what="the chain's ops", fused=" and reads its inputs and writes its output "
                                     "once; at most chain time − slowest op (equal input shapes count as one "
                                     "tensor)") + _partial(g, "they keep their slowest op")
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
    formula = ("time of the ops between the two matmuls (scale, mask, softmax, dropout), which a fused attention "
               "kernel does without the score matrix round trip; the matmuls' time is kept")
    if g.streamed:
        formula = STREAM_FORMULA.format(
            what="the ops between the two matmuls (scale, mask, softmax, dropout)",
            fused=" and never writes the score matrix (0 bytes); the matmuls' time is kept") + _partial(
                g, "they save all of the ops between the matmuls")
    return make_finding(
        ctx, "unfused-attention", f"Use fused attention: softmax between two matmuls on {g.shape}",
        f"Attention is written out ({' → '.join(g.names)}), {g.count} times: the {g.shape} score matrix is "
        f"written and read back by every op between the two matmuls ({basis} time).",
        [fact("occurrences", g.count, "count"), fact(f"attention {basis} time", g.time_ns),
         fact("time a fused kernel keeps (the two matmuls, and on a host-only run the ops' arithmetic)", g.kept_ns),
         *_stream_facts(g, "the ops between the matmuls")],
        [timeline_link(ctx, "first occurrence", *g.first),
         page_link(ctx, "ops", "op table, by shape", "ops", by_shape="1")],
        "Replace matmul → scale/mask → softmax → matmul with "
        "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=..., is_causal=...).",
        g.time_ns - g.kept_ns, g.time_ns, formula, "medium", "small")
