"""Per-op work from shapes: op_work on the args of a real torch.profiler CPU capture (conv, grouped and strided
conv, attention with Lq != Lk, GEMMs, elementwise and reductions), each number recomputed here from the file's
Input Dims / Input type / Concrete Inputs with the formulas of docs/advice.md; the rates against a peak; and the
kernels' share (an op that launched one execution gives it its work, one that launched two gives none)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from explorer.analysis.advice.efficiency import Work, kernel_work, op_work, rate
from explorer.analysis.advice.peaks import find_peak

SIZES = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8, "long int": 8}


def prod(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    x, w = torch.randn(2, 3, 17, 16), torch.randn(8, 3, 3, 3)
    q, k, v = torch.randn(2, 4, 32, 16), torch.randn(2, 4, 48, 16), torch.randn(2, 4, 48, 16)
    a, b = torch.randn(64, 128), torch.randn(128, 32)
    with torch.profiler.profile(record_shapes=True) as prof:
        F.conv2d(x, w, stride=2, padding=1)
        F.conv2d(x, torch.randn(6, 1, 3, 3), groups=3, dilation=2)
        F.scaled_dot_product_attention(q, k, v)
        torch.mm(a, b)
        torch.bmm(torch.randn(3, 5, 7), torch.randn(3, 7, 2))
        (a * a).mean(-1, keepdim=True)
        torch.add(a, torch.randn(128))
        a.sum()
    path = tmp_path_factory.mktemp("eff") / "trace.json"
    prof.export_chrome_trace(str(path))
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]


def expected(name: str, args: dict[str, Any]) -> tuple[str, int | None, int] | None:
    """(kind, FLOPs, bytes) from the args, written out per op without the module's code."""
    dims, types, conc = args["Input Dims"], args["Input type"], args.get("Concrete Inputs", [])
    if not types or types[0] not in SIZES:
        return None
    size = SIZES[types[0]]
    if name in ("aten::conv2d", "aten::convolution", "aten::_convolution", "aten::mkldnn_convolution"):
        x, wt = dims[0], dims[1]
        if name == "aten::mkldnn_convolution":  # (input, weight, bias, padding, stride, dilation, groups)
            pad, stride, dil = (json.loads(conc[i]) for i in (3, 4, 5))
        else:  # (input, weight, bias, stride, padding, dilation, ...)
            stride, pad, dil = (json.loads(conc[i]) for i in (3, 4, 5))
        ho = (x[2] + 2 * pad[0] - dil[0] * (wt[2] - 1) - 1) // stride[0] + 1
        wo = (x[3] + 2 * pad[1] - dil[1] * (wt[3] - 1) - 1) // stride[1] + 1
        out = x[0] * wt[0] * ho * wo
        return "conv", 2 * out * wt[1] * wt[2] * wt[3], (prod(x) + prod(wt) + out) * size
    if "scaled_dot_product" in name:
        (bq, hq, lq, d), lk, dv = dims[0], dims[1][2], dims[2][3]
        return ("attention", 4 * bq * hq * lq * lk * d,
                (prod(dims[0]) + prod(dims[1]) + prod(dims[2]) + bq * hq * lq * dv) * size)
    if name == "aten::mm":
        (m, kk), (_, n) = dims[0], dims[1]
        return "gemm", 2 * m * n * kk, (m * kk + kk * n + m * n) * size
    if name == "aten::bmm":
        (bb, m, kk), (_, _, n) = dims[0], dims[1]
        return "gemm", 2 * bb * m * n * kk, bb * (m * kk + kk * n + m * n) * size
    if name == "aten::mul":
        return "elementwise", None, 3 * prod(dims[0]) * size
    if name == "aten::add":  # [64, 128] + [128] -> [64, 128]
        return "elementwise", None, (prod(dims[0]) + prod(dims[1]) + prod(dims[0])) * size
    if name == "aten::mean":  # over the last dim
        return "reduction", None, (prod(dims[0]) + prod(dims[0][:-1])) * size
    if name == "aten::sum" and conc[1] == "":  # a.sum(): everything
        return "reduction", None, (prod(dims[0]) + 1) * size
    return None


def test_op_work_matches_the_formulas_on_a_real_capture(capture: list[dict[str, Any]]) -> None:
    seen: dict[str, int] = {}
    for e in capture:
        want = expected(e["name"], e["args"])
        got = op_work(e["name"], json.dumps(e["args"]))
        if want is None:
            continue
        assert got is not None, e["name"]
        assert (got.kind, got.flops, got.bytes) == want, e["name"]
        assert got.dtype == "float"
        seen[e["name"]] = seen.get(e["name"], 0) + 1
    assert seen["aten::conv2d"] == 2 and seen["aten::mkldnn_convolution"] == 2
    assert seen["aten::scaled_dot_product_attention"] == 1 and seen["aten::mm"] == 1 and seen["aten::bmm"] == 1
    assert {"aten::mul", "aten::add", "aten::mean"} <= set(seen)
    flash = [e for e in capture if e["name"] == "aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert flash and op_work(flash[0]["name"], json.dumps(flash[0]["args"])) == \
        op_work("aten::scaled_dot_product_attention", json.dumps(flash[0]["args"]))


@pytest.mark.parametrize(("name", "args"), [
    ("aten::conv2d", {"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3]], "Input type": ["float", "float"]}),  # no Concrete
    ("aten::convolution", {"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], [], [], []],
                           "Input type": ["float", "float", "", "", "", "", "", "", ""],
                           "Concrete Inputs": ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"]}),
    ("aten::mul", {"Input Dims": [[4, 3], [5]], "Input type": ["float", "float"]}),  # shapes do not broadcast
    ("aten::mul", {"Input Dims": [[4, 3]], "Input type": ["c10::Float4"]}),  # an unknown dtype
    ("aten::mm", {"Input Dims": [[4, 3], [5, 2]], "Input type": ["float", "float"]}),  # K differs
    ("aten::relu", {"Input Dims": [[4, 3]]}),  # no Input type

    ("aten::mul", "not json"),
])
def test_op_work_says_nothing_when_the_args_do_not_say_enough(name: str, args: Any) -> None:
    assert op_work(name, args if isinstance(args, str) else json.dumps(args)) is None


def test_an_out_tensor_is_the_output_not_an_input() -> None:
    # mul.out(self, other, out) as Kineto records it: the third tensor is written, not read
    out = {"Input Dims": [[128], [], [128]], "Input type": ["float", "double", "float"]}
    assert op_work("aten::mul", json.dumps(out)) == Work("elementwise", "float", None, 128 * 4 + 8 + 128 * 4)
    where = {"Input Dims": [[8], [8], [8]], "Input type": ["bool", "float", "float"]}  # three inputs, all read
    assert op_work("aten::where", json.dumps(where)) == Work("elementwise", "float", None, 8 + 8 * 4 + 8 * 4 + 8 * 4)


def test_attention_entry_points_in_b_l_h_d_layout() -> None:
    args = {"Input Dims": [[2, 48, 4, 16], [2, 64, 4, 16], [2, 64, 4, 32]],
            "Input type": ["c10::BFloat16"] * 3}
    w = op_work("aten::_flash_attention_forward", json.dumps(args))
    assert w == Work("attention", "c10::BFloat16", 2 * 2 * 4 * 48 * 64 * (16 + 32),
                     (2 * 48 * 4 * 16 + 2 * 64 * 4 * 16 + 2 * 64 * 4 * 32 + 2 * 4 * 48 * 32) * 2)


def test_rates_against_the_peak_of_the_kind_and_dtype() -> None:
    h100 = find_peak("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    r = rate("gemm", "c10::BFloat16", 3, 989 * 10**9, 10**6, 2_000_000, h100)  # 989 GFLOP in 2 ms
    assert r["flop_per_s"] == 989 * 10**9 * 10**9 // 2_000_000 and r["bytes_per_s"] == 10**6 * 10**9 // 2_000_000
    assert r["peak_per_s"] == 989_500 * 10**9 and r["pct_of_peak"] == pytest.approx(100 * r["flop_per_s"] / 989.5e12)
    assert r["peak_kind"] == "BF16/FP16 tensor"
    fp32 = rate("gemm", "float", 1, 10, 10, 10, h100)
    assert fp32["peak_per_s"] == 67 * 10**12 and fp32["peak_kind"] == "FP32"  # no tensor cores
    # above the FP32 peak only TF32 tensor cores go: 100 TFLOP/s is a share of the dense TF32 peak (494.5)
    tf32 = rate("gemm", "float", 1, 100 * 10**12, 10, 10**9, h100)
    assert tf32["peak_kind"] == "TF32 tensor" and tf32["pct_of_peak"] == pytest.approx(100 * 100 / 494.5)
    named = rate("gemm", "float", 1, 10**12, 10, 10**9, h100, tensor_op=True)  # a CUTLASS tensorop_s1688 kernel
    assert named["peak_per_s"] == 494_500 * 10**9
    e = rate("elementwise", "float", 1, None, 3_350_000, 1000, h100)  # 3.35 MB in 1 µs: the whole bandwidth
    assert e["peak_kind"] == "memory bandwidth" and e["flop_per_s"] is None and e["bytes_per_s"] == 3_350 * 10**9 and e["pct_of_peak"] == pytest.approx(100.0)
    unknown = rate("gemm", "float", 1, 10, 10, 10, find_peak("Tesla V100-SXM2-32GB"))
    assert unknown["peak_per_s"] is None and unknown["pct_of_peak"] is None and unknown["flop_per_s"] == 10**9


def test_a_kernel_gets_the_work_of_the_op_that_launched_it_alone() -> None:
    # slices: 0 linear (work) > 1 addmm (work) > kernel 2; 3 mul (work) launching kernels 4 and 5; 6 relu (no work)
    # > kernel 7; kernel 8 of the same name as 2 launched by 9 (mm, work)
    t = pa.table({
        "name": ["aten::linear", "aten::addmm", "gemm", "aten::mul", "ew", "ew", "aten::relu", "relu_k", "gemm",
                 "aten::mm"],
        "device_time": [False, False, True, False, True, True, False, True, True, False],
        "op_id": [-1, -1, 1, -1, 3, 3, -1, 6, 9, -1],
        "parent_id": [-1, 0, -1, -1, -1, -1, -1, -1, -1, -1],
        "dur_ns": [0, 0, 1000, 0, 300, 500, 0, 70, 3000, 0],
        "track_id": [1, 1, 2, 1, 2, 2, 1, 2, 3, 1],
    })
    works = {0: Work("gemm", "float", 999, 9), 1: Work("gemm", "float", 100, 40), 3: Work("elementwise", "float", None, 12),
             9: Work("gemm", "float", 500, 60)}
    out = kernel_work(t, works, None)
    assert set(out) == {"gemm"}  # ew: two executions of one mul; relu_k: no op with work above it
    g = out["gemm"]
    assert (g["calls"], g["flops"], g["bytes"], g["time_ns"]) == (2, 600, 100, 4000)
    assert g["flop_per_s"] == 600 * 10**9 // 4000 and g["pct_of_peak"] is None
    only_3 = kernel_work(t, works, None, pa.array([3]))
    assert only_3["gemm"]["calls"] == 1 and only_3["gemm"]["flops"] == 500
