"""Device-profile ingest benchmark: a synthetic Neuron Parquet export with a large Instruction table
(split in parts of 250k rows, as neuron-explorer writes it) plus DmaPacket and Metadata; measures ingest
wall time, peak RSS, and the time to load the stored Instruction table back. Prints numbers.

    .venv/bin/python bench/device.py [--instructions 1000000] [--packets 200000]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402

BASE_NS = 1_748_779_200_000_000_000
TRACKS = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
PART_ROWS = 250_000


def instructions(n: int, rng: np.random.Generator) -> pa.Table:
    """Instructions interleaved over the engines in time order, as a capture lists them."""
    track = rng.integers(0, len(TRACKS), n)
    start = BASE_NS + np.cumsum(rng.integers(5, 60, n))
    dur = rng.integers(20, 400, n)
    engine = np.array([t.lower().replace("tensormatrix", "tensor") for t in TRACKS], dtype=object)[track]
    opcodes = np.array(["MultiplyMoving", "LoadStationary", "TensorTensorOp", "Activate", "Iota", "DmaTrigger"],
                       dtype=object)
    return pa.table({
        "start_ts": pa.array(start, pa.int64()), "end_ts": pa.array(start + dur, pa.int64()),
        "duration_ns": pa.array(dur, pa.int64()), "engine": pa.array(engine, pa.string()),
        "timeline_track": pa.array(np.array(TRACKS, dtype=object)[track], pa.string()),
        "pcore_idx": pa.array(np.zeros(n, dtype=np.int64)), "opcode": pa.array(opcodes[track], pa.string()),
        "operands": pa.array(np.full(n, "src=t1 dst=t2", dtype=object), pa.string()),
        "id": pa.array(np.arange(1, n + 1, dtype=np.int64)), "pc": pa.array(np.arange(n, dtype=np.int64) * 16),
        "bir_id": pa.array(np.full(n, "bir_1", dtype=object), pa.string()),
        "raw_flops": pa.array(np.where(track == 1, 2 * 128 * 128 * 512, 0).astype(np.int64)),
    })


def packets(n: int, rng: np.random.Generator) -> pa.Table:
    start = BASE_NS + np.cumsum(rng.integers(20, 300, n))
    dur = rng.integers(100, 2_000, n)
    size = rng.integers(512, 65_536, n)
    queue = np.array([f"qInput0-Q{i}" for i in range(16)], dtype=object)[rng.integers(0, 16, n)]
    return pa.table({
        "start_ts": pa.array(start, pa.int64()), "end_ts": pa.array(start + dur, pa.int64()),
        "duration_ns": pa.array(dur, pa.int64()), "id": pa.array(np.arange(n, dtype=np.int64)),
        "packet_idx": pa.array(np.zeros(n, dtype=np.int32)), "packet_aggregation_id": pa.array(np.arange(n)),
        "read_bytes": pa.array(size), "write_bytes": pa.array(size), "transfer_bytes": pa.array(size),
        "throughput": pa.array(size / dur * 1e9), "queue_type": pa.array(np.full(n, "input", dtype=object)),
        "queue_name": pa.array(queue, pa.string()), "crc": pa.array(np.zeros(n, dtype=np.int64)),
    })


def write_export(folder: Path, n_inst: int, n_packets: int) -> int:
    rng = np.random.default_rng(11)
    folder.mkdir(parents=True)
    table = instructions(n_inst, rng)
    for part, offset in enumerate(range(0, n_inst, PART_ROWS)):
        pq.write_table(table.slice(offset, PART_ROWS), folder / f"Instruction_{part}.parquet")
    pq.write_table(packets(n_packets, rng), folder / "DmaPacket.parquet")
    end = int(table.column("end_ts")[-1].as_py())
    pq.write_table(pa.table({"profile_schema_version": ["7.4.0"], "first_hw_timestamp": [BASE_NS],
                             "last_hw_timestamp": [end], "profile_name": ["bench"]}), folder / "Metadata.parquet")
    return sum(f.stat().st_size for f in folder.iterdir())


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=1_000_000)
    ap.add_argument("--packets", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "bench@latest"
        size = write_export(export, args.instructions, args.packets)
        rss_before = peak_rss_mib()
        store = RunStore(Path(tmp) / "data")
        t0 = time.perf_counter()
        rec = ingest_paths(store, [export])
        ingest_s = time.perf_counter() - t0
        rss_after = peak_rss_mib()
        allocated = pa.total_allocated_bytes()
        t0 = time.perf_counter()
        stored = store.device_table(rec.id, "bench", "Instruction")
        load_s = time.perf_counter() - t0
        held = pa.total_allocated_bytes() - allocated  # shared null columns counted once
        print(f"device ingest: {args.instructions:,} instructions + {args.packets:,} DMA packets "
              f"({size / 2**20:.1f} MiB of Parquet)")
        print(f"  ingest      {ingest_s:7.2f} s   ({args.instructions / ingest_s / 1e6:.2f} M instructions/s)")
        print(f"  peak RSS    {rss_after:7.0f} MiB (before ingest {rss_before:.0f} MiB)")
        print(f"  load back   {load_s * 1e3:7.1f} ms  Instruction table, {stored.num_rows:,} rows, "
              f"{held / 2**20:.0f} MiB held")


if __name__ == "__main__":
    main()
