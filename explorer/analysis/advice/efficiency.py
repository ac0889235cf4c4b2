"""Per-op work from recorded shapes: FLOPs and bytes of GEMM, convolution and attention ops, bytes of elementwise
and reduction ops, from Kineto's `Input Dims`, `Input type` and `Concrete Inputs`; the achieved rates against the
device's peak (explorer.analysis.advice.peaks); the work of the kernels an op launched alone. The formulas are in
docs/advice.md; loading the args is the caller's."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.advice.ops import ELEMENTWISE, base_name
from explorer.analysis.advice.peaks import GEMMS, HALF, DevicePeak, gemm_mnk
from explorer.model.shapes import OpWork

I64 = np.int64
# Kineto's `Input type` names (c10's type names) -> bytes per element
DTYPE_SIZE = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "Half": 2, "BFloat16": 2,
              "long int": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
              "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::complex<float>": 8, "c10::complex<double>": 16}
REDUCTIONS = frozenset({"mean", "sum", "amax", "amin", "prod", "var", "std", "logsumexp"})
ELEMENTWISE_ONLY = ELEMENTWISE - REDUCTIONS - {"var_mean"}
COMPUTE_KINDS = ("gemm", "conv", "attention")
# (stride, padding, dilation, groups, transposed) positions in Concrete Inputs, per convolution op (aten signatures)
CONV_ARGS: dict[str, tuple[int, int, int, int, int | None]] = {
    "aten::conv1d": (3, 4, 5, 6, None), "aten::conv2d": (3, 4, 5, 6, None), "aten::conv3d": (3, 4, 5, 6, None),
    "aten::convolution": (3, 4, 5, 8, 6), "aten::_convolution": (3, 4, 5, 8, 6),
    "aten::cudnn_convolution": (3, 2, 4, 5, None), "aten::mkldnn_convolution": (4, 3, 5, 6, None),
    "aten::miopen_convolution": (4, 3, 5, 6, None),
}
# attention ops whose q/k/v are [B, H, L, D]; the *_forward kernels' entry points take [B, L, H, D]
ATTENTION_BHLD = frozenset({
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math",
    "aten::_scaled_dot_product_fused_attention_overrideable",
})
ATTENTION_BLHD = frozenset({"aten::_flash_attention_forward", "aten::_efficient_attention_forward"})
# kernel names that say tensor-core math on float32 inputs (CUTLASS s1688/s16816 TF32 tiles, cuBLAS's tf32 kernels)
TENSOR_OP_KERNEL = re.compile(r"tensorop_s\d|tf32", re.IGNORECASE)
# the leading arguments an elementwise op reads (an `out=` variant lists its output tensor after them)
ARITY = {**dict.fromkeys(("add", "sub", "mul", "div", "pow", "maximum", "minimum", "rsub", "masked_fill",
                          "clamp_min", "leaky_relu"), 2),
         **dict.fromkeys(("where", "addcmul", "addcdiv", "lerp", "clamp"), 3)}
# every op name op_work knows (the loader reads only these ops' args)
WORK_OPS: tuple[str, ...] = tuple(sorted({*GEMMS, *CONV_ARGS, *ATTENTION_BHLD, *ATTENTION_BLHD,
                                          *(f"aten::{n}{s}" for n in ELEMENTWISE_ONLY | REDUCTIONS for s in ("", "_"))}))


@dataclass(frozen=True)
class Work:
    """One op call's work: `kind` gemm | conv | attention | elementwise | reduction; `flops` None for the
    memory-bound kinds; `bytes` every tensor input once plus the output, at their dtypes."""

    kind: str
    dtype: str
    flops: int | None
    bytes: int


def numel(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _int_list(text: str) -> list[int] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def op_work(name: str, args_text: str) -> Work | None:
    """The work of one call of `name` from its args JSON text; None when the op is not one of the kinds or the
    args do not say enough (no shapes, an unknown dtype, a transposed convolution)."""
    try:
        args = json.loads(args_text) if args_text else {}
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    dims, types = args.get("Input Dims"), args.get("Input type")
    concrete = args.get("Concrete Inputs") or []
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return None
    short = base_name(name)
    reads = ARITY.get(short, 1) if short in ELEMENTWISE_ONLY else len(dims)  # past them: the `out=` tensor
    tensors = [(d, t) for d, t in zip(dims[:reads], types[:reads], strict=True)
               if isinstance(d, list) and t in DTYPE_SIZE and all(isinstance(v, int) for v in d)]
    if not tensors:
        return None
    conc = [str(c) for c in concrete] if isinstance(concrete, list) else []
    return _work(name, tensors, conc)


def _work(name: str, tensors: list[tuple[list[int], str]], conc: list[str]) -> Work | None:
    dtype = tensors[0][1]
    size = DTYPE_SIZE[dtype]
    if name in GEMMS:
        mnk = gemm_mnk(name, [d for d, _ in tensors])
        if mnk is None:
            return None
        b, m, n, k = mnk
        return Work("gemm", dtype, 2 * b * m * n * k, b * (m * k + k * n + m * n) * size)
    if name in CONV_ARGS:
        return _conv(name, tensors, conc)
    if name in ATTENTION_BHLD or name in ATTENTION_BLHD:
        return _attention(name, tensors)
    short = base_name(name)
    if short in ELEMENTWISE_ONLY:
        shape = _broadcast([d for d, _ in tensors])
        if shape is None:
            return None
        # the output's dtype: the widest of the inputs that are not 0-dim (a wrapped Python scalar does not promote)
        out_t = max((t for d, t in tensors if d), key=lambda t: DTYPE_SIZE[t], default=dtype)
        return Work("elementwise", out_t, None,
                    sum(numel(d) * DTYPE_SIZE[t] for d, t in tensors) + numel(shape) * DTYPE_SIZE[out_t])
    if short in REDUCTIONS:
        x = tensors[0][0]
        reduced = _int_list(conc[1]) if len(conc) > 1 and conc[1] else None
        axes = {a % len(x) for a in reduced} if reduced and x else set(range(len(x)))
        kept = numel([d for i, d in enumerate(x) if i not in axes])
        return Work("reduction", dtype, None, numel(x) * size + kept * size)
    return None


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out


def _conv(name: str, tensors: list[tuple[list[int], str]], conc: list[str]) -> Work | None:
    """FLOPs = 2·N·Cout·∏(output spatial)·(Cin/groups)·∏(kernel); output spatial from stride, padding and dilation
    (Concrete Inputs); bytes = input + weight + output."""
    s_at, p_at, d_at, g_at, t_at = CONV_ARGS[name]
    if len(tensors) < 2 or len(conc) <= max(s_at, p_at, d_at, g_at):
        return None
    (x, dtype), (w, _) = tensors[0], tensors[1]
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x) or (t_at is not None and conc[t_at] not in ("False", "0", "")):
        return None
    lists = [_int_list(conc[at]) for at in (s_at, p_at, d_at)]
    groups = _int_list(conc[g_at]) if conc[g_at] else [1]
    if groups is None or len(groups) != 1 or any(v is None or len(v) not in (1, spatial) for v in lists):
        return None
    stride, pad, dil = ([v[0]] * spatial if len(v) == 1 else v for v in lists if v is not None)
    if x[1] != w[1] * groups[0]:
        return None
    out_sp = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(spatial)]
    if min(out_sp) < 1:
        return None
    out = numel([x[0], w[0], *out_sp])
    size = DTYPE_SIZE[dtype]
    flops = 2 * out * w[1] * numel(w[2:])
    return Work("conv", dtype, flops, (numel(x) + numel(w) + out) * size)


def _attention(name: str, tensors: list[tuple[list[int], str]]) -> Work | None:
    """FLOPs = 2·B·H·Lq·Lk·D (Q·Kᵀ) + 2·B·H·Lq·Lk·Dv (P·V), 4·B·H·Lq·Lk·D when Dv = D; no causal discount;
    bytes = q + k + v + the output [B, H, Lq, Dv]."""
    if len(tensors) < 3 or any(len(d) != 4 for d, _ in tensors[:3]):
        return None
    (q, dtype), (k, _), (v, _) = tensors[:3]
    if name in ATTENTION_BLHD:  # [B, L, H, D] -> [B, H, L, D]
        q, k, v = ([d[0], d[2], d[1], d[3]] for d in (q, k, v))
    b, h, lq, d = q
    lk, dv = k[2], v[3]
    if k[3] != d or v[2] != lk:
        return None
    size = DTYPE_SIZE[dtype]
    return Work("attention", dtype, 2 * b * h * lq * lk * (d + dv),
                (numel(q) + numel(k) + numel(v) + b * h * lq * dv) * size)


def peak_for(kind: str, dtype: str, peak: DevicePeak | None, achieved: int | None = None,
             tensor_op: bool = False) -> tuple[int | None, str | None]:
    """The peak a rate is a share of, and which: BF16/FP16 tensor FLOP/s for half-precision compute kinds; for
    float32 the FP32 rate, or the TF32 tensor rate when the kernel's name says tensor op or the rate is above the
    FP32 peak (which only TF32 tensor cores reach); memory bandwidth for elementwise and reduction ops. (None, None)
    for an unknown device or dtype."""
    if peak is None:
        return None, None
    if kind not in COMPUTE_KINDS:
        return peak.hbm, None if peak.hbm is None else "memory bandwidth"
    if dtype in HALF:
        return peak.bf16_flops, "BF16/FP16 tensor"
    if dtype != "float":
        return None, None
    if peak.tf32_flops is not None and (tensor_op or (achieved is not None and achieved > peak.fp32_flops)):
        return peak.tf32_flops, "TF32 tensor"
    return peak.fp32_flops, "FP32"


def rate(kind: str, dtype: str, calls: int, flops: int | None, nbytes: int, time_ns: int,
         peak: DevicePeak | None, tensor_op: bool = False) -> OpWork:
    """Achieved FLOP/s and bytes/s (integers, floor) over `time_ns`, and the % of the kind's peak."""
    flop_s = flops * 10**9 // time_ns if flops is not None and time_ns > 0 else None
    byte_s = nbytes * 10**9 // time_ns if time_ns > 0 else None
    achieved = flop_s if kind in COMPUTE_KINDS else byte_s
    top, which = peak_for(kind, dtype, peak, achieved, tensor_op)
    pct = None if top is None or achieved is None else 100 * achieved / top
    return {"kind": kind, "dtype": dtype, "calls": calls, "flops": flops, "bytes": nbytes, "time_ns": time_ns,
            "flop_per_s": flop_s, "bytes_per_s": byte_s, "peak_per_s": top, "peak_kind": which, "pct_of_peak": pct}


@dataclass
class WorkSum:
    """Work summed over calls of one group; `kind`/`dtype` "" once calls of different kinds or dtypes mix."""

    kind: str
    dtype: str
    calls: int = 0
    flops: int | None = 0
    bytes: int = 0
    time_ns: int = 0

    def add(self, w: Work, time_ns: int = 0) -> None:
        if w.kind != self.kind:
            self.kind = ""
        if w.dtype != self.dtype:
            self.dtype = ""
        self.calls += 1
        self.flops = None if self.flops is None or w.flops is None else self.flops + w.flops
        self.bytes += w.bytes
        self.time_ns += time_ns

    def rate(self, time_ns: int, peak: DevicePeak | None, tensor_op: bool = False) -> OpWork:
        return rate(self.kind or "mixed", self.dtype, self.calls, self.flops, self.bytes, time_ns,
                    peak if self.kind and self.dtype else None, tensor_op)


def sum_work(keys: list[tuple[str, ...]], works: list[Work]) -> dict[tuple[str, ...], WorkSum]:
    out: dict[tuple[str, ...], WorkSum] = {}
    for key, w in zip(keys, works, strict=True):
        out.setdefault(key, WorkSum(w.kind, w.dtype)).add(w)
    return out


def kernel_work(slices: pa.Table, works: dict[int, Work], peak: DevicePeak | None,
                tracks: pa.Array | None = None) -> dict[str, OpWork]:
    """Per device execution name: the work of the executions whose op (or the nearest op above it with known work)
    launched that execution alone, summed, over those executions' own time. An op that launched several
    executions gives none of them its work: how it splits between them is unknown. `tracks` keeps the
    executions on those tracks."""
    n = slices.num_rows
    dev = np.asarray(pc.fill_null(slices.column("device_time"), False).to_numpy(zero_copy_only=False), bool)
    mine = dev if tracks is None else dev & np.isin(slices.column("track_id").to_numpy(), np.asarray(tracks))
    execs = np.flatnonzero(dev)
    op = slices.column("op_id").to_numpy().astype(I64)[execs]
    parent = slices.column("parent_id").to_numpy().astype(I64)
    count = np.zeros(n, I64)  # device executions in each op's subtree
    cur, ok = op.copy(), (op >= 0) & (op < n)
    for _ in range(256):
        cur = cur[ok]
        if not len(cur):
            break
        np.add.at(count, cur, 1)
        cur = parent[cur]
        ok = (cur >= 0) & (cur < n)
    owner = np.full(len(execs), -1, I64)  # the nearest op with known work
    known = np.zeros(n, bool)
    known[[i for i in works if 0 <= i < n]] = True
    cur = op.copy()
    for _ in range(256):
        live = (owner < 0) & (cur >= 0) & (cur < n)
        if not live.any():
            break
        hit = live & known[np.where(live, cur, 0)]
        owner[hit] = cur[hit]
        cur = np.where(live & ~hit, parent[np.where(live, cur, 0)], -1)
    alone = (owner >= 0) & (count[np.where(owner >= 0, owner, 0)] == 1) & mine[execs]
    names = slices.column("name").take(pa.array(execs[alone])).to_pylist()
    dur = slices.column("dur_ns").to_numpy().astype(I64)[execs[alone]]
    sums: dict[str, WorkSum] = {}
    for name, o, d in zip(names, owner[alone].tolist(), dur.tolist(), strict=True):
        w = works[o]
        sums.setdefault(str(name), WorkSum(w.kind, w.dtype)).add(w, int(d))
    return {k: s.rate(s.time_ns, peak, bool(TENSOR_OP_KERNEL.search(k))) for k, s in sums.items()}
