"""A small synthetic Kineto trace with a device side worth a kernel view: long C++ kernel names, a Triton
kernel with Inductor's kernel_flop / kernel_num_gb, NCCL, memcpy both ways, memset, a hostile kernel
name, cuda_runtime / cuda_driver launches linked by ac2g flows and gpu_user_annotation spans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HOSTILE_KERNEL = "<script>alert('k')</script>_kernel"
MUL_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
              "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
              "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
              "at::detail::Array<char*, 3>)")
GEMM_KERNEL = "ampere_sgemm_128x64_tn"
TRITON_KERNEL = "triton_poi_fused_add_mul_0"
NCCL_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
HTOD = "Memcpy HtoD (Pageable -> Device)"
DTOH = "Memcpy DtoH (Device -> Pageable)"
MEMSET = "Memset (Device)"
STEPS = 3
STEP_US = 2000

# (op, launch call, device execution, device category, kernel duration µs per step, extra args)
LAUNCHES: list[tuple[str, str, str, str, list[int], dict[str, Any]]] = [
    ("aten::copy_", "cudaMemcpyAsync", HTOD, "gpu_memcpy", [12, 14, 10], {"bytes": 4096}),
    ("aten::mul", "cudaLaunchKernel", MUL_KERNEL, "kernel", [50, 70, 60],
     {"grid": [80, 1, 1], "block": [128, 1, 1], "registers per thread": 20, "shared memory": 0,
      "est. achieved occupancy %": 12}),
    ("aten::addmm", "cudaLaunchKernel", GEMM_KERNEL, "kernel", [300, 320, 310],
     {"grid": [16, 8, 1], "block": [256, 1, 1], "registers per thread": 128, "shared memory": 49152,
      "est. achieved occupancy %": 25}),
    ("triton_poi_fused_add_mul_0", "cuLaunchKernel", TRITON_KERNEL, "kernel", [40, 40, 44],
     {"grid": [64, 1, 1], "block": [128, 1, 1], "registers per thread": 24, "shared memory": 0,
      "kernel_flop": 8_000_000, "kernel_num_gb": 0.004}),
    ("aten::zero_", "cudaMemsetAsync", MEMSET, "gpu_memset", [3, 4, 3], {"bytes": 1024}),
    ("nccl:all_reduce", "cudaLaunchKernel", NCCL_KERNEL, "kernel", [400, 380, 420],
     {"grid": [2, 1, 1], "block": [544, 1, 1], "registers per thread": 96, "shared memory": 87568}),
    ("aten::relu", "cudaLaunchKernel", HOSTILE_KERNEL, "kernel", [5, 6, 7], {}),
    ("aten::item", "cudaMemcpyAsync", DTOH, "gpu_memcpy", [8, 9, 8], {"bytes": 4}),
]


def kernel_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]
    ext = corr = 0
    for step in range(STEPS):
        t0 = step * STEP_US
        ext += 1
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 1}", "pid": 1, "tid": 1,
                       "ts": t0, "dur": STEP_US - 100, "args": {"External id": ext}})
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{step + 1}", "pid": 0,
                       "tid": 7, "ts": t0 + 5, "dur": STEP_US - 110, "args": {"External id": ext}})
        host = gpu = t0 + 10
        for op, call, kernel, cat, durations, extra in LAUNCHES:
            ext += 1
            corr += 1
            events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": host, "dur": 30,
                           "args": {"External id": ext}})
            launch_cat = "cuda_driver" if call == "cuLaunchKernel" else "cuda_runtime"
            events.append({"ph": "X", "cat": launch_cat, "name": call, "pid": 1, "tid": 1, "ts": host + 5,
                           "dur": 10, "args": {"External id": ext, "correlation": corr}})
            gpu = max(gpu, host + 20)
            events.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": 7, "ts": gpu,
                           "dur": durations[step], "args": {"External id": ext, "device": 0, "stream": 7,
                                                            "correlation": corr, **extra}})
            events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": host + 5})
            events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": gpu,
                           "bp": "e"})
            host += 40
            gpu += durations[step] + 15
    return events


def write_kernel_trace(path: Path) -> Path:
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000,
           "deviceProperties": [{"id": 0, "name": "Fake GPU"}], "traceEvents": kernel_events()}
    path.write_text(json.dumps(doc))
    return path


def host_only_trace(path: Path) -> Path:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
               "args": {}} for i in range(4)]
    path.write_text(json.dumps({"traceEvents": events}))
    return path
