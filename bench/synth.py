"""Synthetic Kineto-shaped traces for benchmarks: realistic nesting, args and flows, any size.

Each unit is a framework op with a child op that launches a kernel (cudaLaunchKernel on the host
thread, the kernel on a GPU stream, an ac2g flow between them): six events, ~240 bytes each.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

OPS = ("aten::linear", "aten::layer_norm", "aten::gelu", "aten::softmax", "aten::add", "aten::mul")
CHILD = {"aten::linear": "aten::addmm", "aten::layer_norm": "aten::native_layer_norm",
         "aten::gelu": "aten::gelu_", "aten::softmax": "aten::_softmax", "aten::add": "aten::add_",
         "aten::mul": "aten::mul_"}
KERNELS = ("ampere_sgemm_128x64_tn", "vectorized_layer_norm_kernel", "GeluCUDAKernelImpl",
           "cunn_SoftMaxForward", "vectorized_elementwise_kernel<4, add>", "vectorized_elementwise_kernel<4, mul>")
BASE_NS = 1_700_000_000_000_000_000
EVENTS_PER_UNIT = 6


def write_kineto_trace(path: Path, n_events: int, threads: int = 2, distinct: int = 0) -> int:
    """Write a trace of about n_events events (plus metadata); returns its size in bytes. `distinct` > 0
    numbers the names (`aten::add#17`) so the op table has about 2 x distinct rows, the kernel table distinct."""
    units = max(1, n_events // EVENTS_PER_UNIT)
    host_pid, gpu_pid = 4242, 0
    with path.open("w") as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}],\n')
        f.write(f'"baseTimeNanoseconds": {BASE_NS},\n"traceEvents": [\n')
        f.write(json.dumps({"ph": "M", "name": "process_name", "pid": host_pid, "tid": 0,
                            "args": {"name": "python"}}) + ",\n")
        f.write(json.dumps({"ph": "M", "name": "process_name", "pid": gpu_pid, "tid": 0,
                            "args": {"name": "GPU 0"}}) + ",\n")
        f.write(json.dumps({"ph": "M", "name": "process_labels", "pid": gpu_pid, "tid": 0,
                            "args": {"labels": "GPU 0"}}) + ",\n")
        clock = [0.0] * threads
        gpu_clock = 0.0
        for u in range(units):
            t = u % threads
            tid = 1000 + t
            k = u % len(OPS)
            tag = f"#{u % distinct}" if distinct else ""
            ext = 2 * u + 1
            corr = u + 1
            start = clock[t]
            child_dur, launch_dur = 8.25 + (u % 5), 3.125
            op_dur = child_dur + 3.0 + (u % 7)
            shape = f"[[{8 + u % 4}, 512, 1024], [1024]]"
            sep = ",\n" if u else ""
            f.write(
                f'{sep}{{"ph": "X", "cat": "cpu_op", "name": "{OPS[k]}{tag}", "pid": {host_pid}, "tid": {tid}, '
                f'"ts": {start:.3f}, "dur": {op_dur:.3f}, "args": {{"External id": {ext}, "Sequence number": {u}, '
                f'"Fwd thread id": 0, "Input Dims": {shape}, "Input type": ["float", "float"], "Ev Idx": {ext}}}}},\n'
                f'{{"ph": "X", "cat": "cpu_op", "name": "{CHILD[OPS[k]]}{tag}", "pid": {host_pid}, "tid": {tid}, '
                f'"ts": {start + 1.5:.3f}, "dur": {child_dur:.3f}, "args": {{"External id": {ext + 1}, '
                f'"Input Dims": {shape}, "Input type": ["float", "float"], "Ev Idx": {ext + 1}}}}},\n'
                f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {host_pid}, "tid": {tid}, '
                f'"ts": {start + 3.0:.3f}, "dur": {launch_dur:.3f}, "args": {{"External id": {ext + 1}, '
                f'"cbid": 211, "correlation": {corr}}}}},\n'
            )
            kstart = max(gpu_clock, start + 6.0)
            kdur = 4.0 + (u % 11)
            f.write(
                f'{{"ph": "X", "cat": "kernel", "name": "{KERNELS[k]}{tag}", "pid": {gpu_pid}, "tid": 7, '
                f'"ts": {kstart:.3f}, "dur": {kdur:.3f}, "args": {{"External id": {ext + 1}, "queued": 0, '
                f'"device": 0, "context": 1, "stream": 7, "correlation": {corr}, "registers per thread": 32, '
                f'"shared memory": 0, "blocks per SM": 0.5, "grid": [128, 1, 1], "block": [256, 1, 1]}}}},\n'
                f'{{"ph": "s", "id": {corr}, "pid": {host_pid}, "tid": {tid}, "ts": {start + 3.0:.3f}, '
                f'"cat": "ac2g", "name": "ac2g"}},\n'
                f'{{"ph": "f", "id": {corr}, "pid": {gpu_pid}, "tid": 7, "ts": {kstart:.3f}, '
                f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}'
            )
            gpu_clock = kstart + kdur + 0.5
            clock[t] = start + op_dur + 0.75
        f.write("\n]}\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    size = write_kineto_trace(args.path, args.events)
    print(f"wrote {args.path} ({size / 1e6:.1f} MB, ~{args.events:,} events)")


if __name__ == "__main__":
    main()
