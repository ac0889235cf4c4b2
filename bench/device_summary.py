"""Device-profile analysis benchmark: time of the window Summary, opcode summary, DMA breakdown, roofline and
recommendations on a synthetic Neuron device profile (Arrow tables named as the export's, in memory).

Windows are the full span, 10 % and 0.1 % of it at random positions; p50/p95 over the repeats. The tables
are built here (random engines, opcodes, layers, 16 DMA queues), not read from disk, so this measures
the analysis only, not the store.

    .venv/bin/python bench/device_summary.py [--instructions 1000000] [--repeat 10]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer.analysis.device.advice import compute_recommendations  # noqa: E402
from explorer.analysis.device.breakdown import compute_dma_breakdown, compute_opcode_summary  # noqa: E402
from explorer.analysis.device.roofline import compute_roofline  # noqa: E402
from explorer.analysis.device.summary import compute_device_summary  # noqa: E402

BASE_NS = 1_700_000_000_000_000_000
SPAN_NS = 2_000_000_000


def synthetic_profile(n: int, seed: int = 0) -> dict[str, pa.Table]:
    rng = np.random.default_rng(seed)
    pick = lambda values, size: pa.array(np.asarray(values)[rng.integers(0, len(values), size)])  # noqa: E731
    start = BASE_NS + np.sort(rng.integers(0, SPAN_NS, n))
    dur = rng.integers(10, 2_000, n)
    instruction = pa.table({
        "start_ts": start, "end_ts": start + dur, "duration_ns": dur,
        "engine": pick(["Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync"], n),
        "opcode": pick(["MATMUL", "LoadStationary", "TensorTensor", "Activate", "Iota", "DmaTrigger"], n),
        "pcore_idx": rng.integers(0, 2, n), "evt_wait_time_ns": rng.integers(0, 10, n),
        "raw_flops": rng.integers(0, 1 << 24, n), "flops_transpose": rng.integers(0, 1 << 10, n),
        "hbm_read_bytes": rng.integers(0, 1 << 16, n), "hbm_write_bytes": rng.integers(0, 1 << 16, n),
        "layer": pick([f"aten::op{i}" for i in range(20)], n)})
    m = n // 2
    pstart = BASE_NS + np.sort(rng.integers(0, SPAN_NS, m))
    pdur = rng.integers(10, 3_000, m)
    packets = pa.table({
        "start_ts": pstart, "end_ts": pstart + pdur, "duration_ns": pdur, "pcore_idx": rng.integers(0, 2, m),
        "transfer_bytes": rng.integers(64, 1 << 17, m),
        "queue_type": pick(["input", "output", "data", "software_dynamic", "hardware_dynamic"], m),
        "queue_name": pick([f"qSyncIO{i}" for i in range(16)], m)})
    metadata = pa.table({"first_hw_timestamp": [BASE_NS], "last_hw_timestamp": [BASE_NS + SPAN_NS],
                         "tensor_engine_num_rows": [128], "tensor_engine_num_cols": [128],
                         "tensor_engine_clock_freq": [1.4], "hbm_ddr_bandwidth": [6.4e11]})
    return {"Instruction": instruction, "DmaPacket": packets, "Metadata": metadata}


def measure(fn: Callable[[int | None, int | None], object], fraction: float, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        if fraction >= 1:
            t0, t1 = None, None
        else:
            length = int(SPAN_NS * fraction)
            t0 = BASE_NS + random.randrange(SPAN_NS - length)
            t1 = t0 + length
        began = time.perf_counter()
        fn(t0, t1)
        times.append(1000 * (time.perf_counter() - began))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    tables = synthetic_profile(args.instructions)
    whole = compute_device_summary(tables)  # the API computes the profile's own Summary once per profile
    cases: dict[str, Callable[[int | None, int | None], object]] = {
        "summary": lambda a, b: compute_device_summary(tables, a, b),
        "opcodes": lambda a, b: compute_opcode_summary(tables, a, b),
        "dma": lambda a, b: compute_dma_breakdown(tables, a, b),
        "roofline": lambda a, b: compute_roofline(tables, a, b, profile=whole),
        "advice": lambda a, b: compute_recommendations(tables, a, b),
    }
    print(f"{args.instructions:,} instructions, {args.instructions // 2:,} DMA packets")
    for name, fn in cases.items():
        for fraction in (1.0, 0.1, 0.001):
            ms = measure(fn, fraction, args.repeat)
            p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) > 1 else ms[0]
            print(f"{name:9} window {fraction:>6.1%}: p50 {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms")


if __name__ == "__main__":
    main()
