"""The timeline's label cutter (static/js/tracks.js TE.shortName), run under Node with a case table:
C++ kernel names lose argument list, template arguments and return type before the namespace."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from explorer.config import PROJECT_ROOT
from tests.helpers.kernel_trace import MUL_KERNEL

FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
        "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
LAMBDA = ("at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const"
          "::{lambda()#7}::operator()() const::{lambda(float)#1}")
IMPL = f"at::native::gpu_kernel_impl_nocast<{LAMBDA}>(at::TensorIteratorBase&, {LAMBDA} const&)::{{lambda(int)#1}}"
COPY = f"void at::native::elementwise_kernel<128, 2, {IMPL}>(int, {IMPL})"  # as in the ROCm trace of ../shared
CASES = [
    (FILL, "vectorized_elementwise_kernel"),
    (MUL_KERNEL, "vectorized_elementwise_kernel"),
    (COPY, "elementwise_kernel"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long)",
     "max_pool_forward_nchw"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false>(float*, float const*, int)",
     "softmax_warp_forward"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>"
     "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4::Params)", "cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("aten::mul", "mul"),
    ("aten::layer_norm", "layer_norm"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD"),
    ("ProfilerStep#1", "ProfilerStep#1"),
    ("cudaLaunchKernel", "cudaLaunchKernel"),
    ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),
    ("nccl:all_reduce", "nccl:all_reduce"),
    ("operator<<", "operator<<"),
    ("<script>alert(1)</script>", "<script>alert(1)</script>"),
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_short_names() -> None:
    script = ("global.window = {}; require(process.argv[1]);"
              "const names = JSON.parse(process.argv[2]);"
              "console.log(JSON.stringify(names.map(window.TE.shortName)));")
    names = [name for name, _ in CASES]
    out = subprocess.run(["node", "-e", script, str(PROJECT_ROOT / "static" / "js" / "tracks.js"), json.dumps(names)],
                         capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(out.stdout) == [short for _, short in CASES]
