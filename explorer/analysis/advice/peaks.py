"""Device peaks, one row per device model with its source, and the per-op efficiency that reads them: FLOPs and
bytes of GEMM ops from their input shapes and dtypes, against the time the op took. A device no row matches has
no peak: the page says so, never a guess. Dense (no 2:4 sparsity) peaks; FP32 is the non-tensor-core rate, which
is what a float32 matmul gets with PyTorch's default (TF32 off for matmul)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from explorer.analysis.advice.ops import OpSeq, parse_shapes
from explorer.model.advice_shapes import EfficiencyRow, PeakJson

T = 10**12
G = 10**9


@dataclass(frozen=True)
class DevicePeak:
    """`match`: substrings of the device name (any case), all of which must appear; `hbm` None where the name does
    not say which memory variant it is."""

    model: str
    match: tuple[str, ...]
    bf16_flops: int  # FLOP/s, dense tensor BF16/FP16
    fp32_flops: int  # FLOP/s, FP32 without tensor cores
    hbm: int | None  # bytes/s
    source: str
    tf32_flops: int | None = None  # FLOP/s, dense TF32 tensor (AMD MI200: the FP32 matrix rate); None: none


NV_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100)"
NV_H100 = "NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
NV_H200 = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)"
NV_B200 = ("NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx, the individual GPU's column: FP32 75 "
           "TFLOPS, TF32 2.2 and FP16/BF16 4.5 PFLOPS with sparsity, 7.7 TB/s)")
AMD_MI250 = "AMD Instinct MI250X / MI250 specifications (amd.com/en/products/accelerators/instinct/mi200)"
AMD_MI300X = "AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x)"
AWS_TRN1 = "AWS Neuron docs, Trainium architecture (awsdocs-neuron.readthedocs-hosted.com, arch/neuron-hardware/trainium)"
AWS_TRN2 = "AWS Neuron docs, Trainium2 architecture (awsdocs-neuron.readthedocs-hosted.com, arch/neuron-hardware/trainium2)"

# first match wins: the specific variants before the family's row
PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak("A100 SXM4 80GB", ("a100", "80gb"), 312 * T, 19_500 * G, 2_039 * G, NV_A100, 156 * T),
    DevicePeak("A100 40GB", ("a100", "40gb"), 312 * T, 19_500 * G, 1_555 * G, NV_A100, 156 * T),
    DevicePeak("A100", ("a100",), 312 * T, 19_500 * G, None, NV_A100, 156 * T),
    DevicePeak("H100 PCIe", ("h100", "pcie"), 756_500 * G, 51 * T, 2_000 * G, NV_H100, 378 * T),
    DevicePeak("H100 NVL", ("h100", "nvl"), 835_500 * G, 60 * T, 3_900 * G, NV_H100, 417_500 * G),
    DevicePeak("H100 SXM", ("h100",), 989_500 * G, 67 * T, 3_350 * G, NV_H100, 494_500 * G),
    DevicePeak("H200 SXM", ("h200",), 989_500 * G, 67 * T, 4_800 * G, NV_H200, 494_500 * G),
    DevicePeak("B200", ("b200",), 2_250 * T, 75 * T, 7_700 * G, NV_B200, 1_100 * T),
    DevicePeak("MI250X", ("mi250x",), 383 * T, 47_900 * G, 3_277 * G, AMD_MI250, 95_700 * G),
    DevicePeak("MI250", ("mi250",), 362_100 * G, 45_300 * G, 3_277 * G, AMD_MI250, 90_500 * G),
    DevicePeak("MI300X", ("mi300x",), 1_307_400 * G, 163_400 * G, 5_300 * G, AMD_MI300X, 653_700 * G),
    DevicePeak("Trainium (Trn1)", ("trn1",), 190 * T, 47_500 * G, 820 * 2**30, AWS_TRN1, 190 * T),
    DevicePeak("Trainium2 (Trn2)", ("trn2",), 667 * T, 181 * T, 2_900 * G, AWS_TRN2, 667 * T),
)
DTYPE_BYTES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "BFloat16": 2, "Half": 2}
HALF = frozenset({"c10::BFloat16", "c10::Half", "BFloat16", "Half"})
GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul")
TOP_ROWS = 15


def find_peak(device: str) -> DevicePeak | None:
    low = device.lower()
    return next((p for p in PEAKS if all(m in low for m in p.match)), None)


def peak_json(device: str) -> PeakJson | None:
    p = find_peak(device)
    return None if p is None else {"model": p.model, "bf16_flops": p.bf16_flops, "fp32_flops": p.fp32_flops,
                                   "tf32_flops": p.tf32_flops, "hbm_bytes_per_s": p.hbm, "source": p.source}


def gemm_mnk(name: str, dims: list[list[int]]) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a GEMM op from its input shapes; None when the shapes do not say."""
    mats = [d for d in dims if d]
    if name in ("aten::addmm", "aten::baddbmm") and len(mats) == 3:
        mats = mats[1:]
    if name == "aten::linear" and len(mats) >= 2 and len(mats[1]) == 2:
        x, w = mats[0], mats[1]
        rows = 1
        for d in x[:-1]:
            rows *= d
        return (1, rows, w[0], x[-1]) if x[-1] == w[1] else None
    if len(mats) < 2 or len(mats[0]) < 2 or len(mats[1]) < 2:
        return None
    a, b = mats[0], mats[1]
    if a[-1] != b[-2]:
        return None
    batch = 1
    for d in (a[:-2] if len(a) >= len(b) else b[:-2]):
        batch *= d
    return batch, a[-2], b[-1], a[-1]


def compute_efficiency(ops: OpSeq, dtypes: dict[int, str], device: str) -> list[EfficiencyRow]:
    """GEMM ops grouped by (name, shapes, dtype), most time first: FLOPs (2·B·M·N·K per call), bytes (A, B and C
    once per call), time and the device's peaks for that dtype (None: unknown device or dtype)."""
    peak = find_peak(device)
    groups: dict[tuple[str, str, str], EfficiencyRow] = {}
    for i, name in enumerate(ops.names):
        if name not in GEMMS or ops.parent_names[i] in GEMMS:  # matmul -> mm: the outer op counts once
            continue
        mnk = gemm_mnk(name, parse_shapes(ops.shapes[i]))
        dtype = dtypes.get(int(ops.slice_id[i]), "")
        if mnk is None:
            continue
        b, m, n, k = mnk
        size = DTYPE_BYTES.get(dtype)
        row = groups.setdefault((name, ops.shapes[i], dtype), {
            "name": name, "input_shapes": ops.shapes[i], "dtype": dtype, "calls": 0, "flops": 0,
            "bytes": None if size is None else 0, "time_ns": 0,
            "peak_flops_per_s": None if peak is None or size is None else (
                peak.bf16_flops if dtype in HALF else peak.fp32_flops if dtype == "float" else None),
            "peak_bytes_per_s": None if peak is None else peak.hbm})
        row["calls"] += 1
        row["flops"] += 2 * b * m * n * k
        if size is not None and row["bytes"] is not None:
            row["bytes"] += b * (m * k + k * n + m * n) * size
        row["time_ns"] += int(ops.time[i])
    return sorted(groups.values(), key=lambda r: (-r["time_ns"], r["name"], r["input_shapes"]))[:TOP_ROWS]


def first_input_type(args_text: str) -> str:
    """Kineto's `Input type` list's first entry (the first matrix), "" when absent."""
    try:
        types = json.loads(args_text).get("Input type", [])
    except (ValueError, AttributeError):
        return ""
    return next((t for t in types if isinstance(t, str) and t), "") if isinstance(types, list) else ""
