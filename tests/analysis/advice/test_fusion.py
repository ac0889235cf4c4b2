"""The unfused-elementwise rule's bytes-at-bandwidth floor on a known device: a fused kernel moves the chain's
distinct inputs and its output once, at the device's memory bandwidth (the H100 SXM datasheet's 3,350 GB/s,
written here); the saving keeps max(that floor, the slowest op). Recomputed from the file with plain json."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

from explorer.store.runs import RunStore
from tests.analysis.advice.builder import Op, build
from tests.analysis.advice.test_engine_rules import US, advise, only

H100_BYTES_PER_S = 3_350 * 10**9  # NVIDIA H100 SXM datasheet


def norm(rows: int, hidden: int, kernel: int) -> list[Op]:
    x, r, f = [rows, hidden], [rows, 1], ["float", "float"]
    return [Op("aten::mul", 10, [x, x], kernel, types=f), Op("aten::mean", 10, [x, []], kernel, types=f),
            Op("aten::add", 10, [r, []], kernel, types=["float", "Scalar"]), Op("aten::rsqrt", 10, [r], kernel,
                                                                              types=["float"]),
            Op("aten::mul", 10, [x, r], kernel, types=f), Op("aten::mul", 10, [x, [hidden]], kernel, types=f)]


def floor_ns(path: Path) -> tuple[int, int]:
    """(bytes, ns) of one occurrence: the distinct input shapes of more than one element and the last op's largest
    input, 4 bytes each, at the H100's bandwidth (rounded up)."""
    ops = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"][:6]

    def n(s: list[int]) -> int:
        return math.prod(s)

    shapes = {tuple(s) for e in ops for s in e["args"]["Input Dims"] if n(s) > 1}
    out = max(ops[-1]["args"]["Input Dims"], key=n)
    nbytes = (sum(n(list(s)) for s in shapes) + n(out)) * 4
    return nbytes, -(-nbytes * 10**9 // H100_BYTES_PER_S)


def kernels_us(path: Path) -> list[int]:
    return [e["dur"] for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "kernel"]


def test_a_big_norm_is_held_to_its_bytes_at_bandwidth(store: RunStore, tmp_path: Path) -> None:
    path = build(norm(4096, 8192, 30) * 2, tmp_path / "big.json", "NVIDIA H100 80GB HBM3")
    nbytes, floor = floor_ns(path)
    assert floor > 30 * US  # the floor, not the slowest op, is what a fused kernel keeps here
    f = only(advise(store, path), "unfused-elementwise")
    chain = 6 * 30 * US
    assert f["acts_on_ns"] == 2 * chain and f["saving_ns"] == 2 * (chain - floor)
    facts = {x["label"]: x["value"] for x in f["facts"]}
    assert facts["bytes one fused kernel per occurrence moves, summed"] == 2 * nbytes
    assert facts["those bytes at the H100 SXM's memory bandwidth"] == 2 * floor
    assert "3,350 GB/s" in f["formula"] and "max(bytes floor, slowest op)" in f["formula"]


def test_a_small_norm_keeps_its_slowest_op(store: RunStore, tmp_path: Path) -> None:
    path = build(norm(64, 2048, 20), tmp_path / "small.json", "NVIDIA H100 80GB HBM3")
    _, floor = floor_ns(path)
    assert floor < 20 * US
    f = only(advise(store, path), "unfused-elementwise")
    assert f["saving_ns"] == (sum(kernels_us(path)) - max(kernels_us(path))) * US


def test_an_unknown_device_keeps_the_slowest_op_and_says_why(store: RunStore, tmp_path: Path) -> None:
    path = build(norm(4096, 8192, 30) * 2, tmp_path / "v100.json", "Tesla V100-SXM2-32GB")
    f = only(advise(store, path), "unfused-elementwise")
    assert f["saving_ns"] == 2 * 5 * 30 * US  # chain − slowest op, twice
    assert "unknown device “Tesla V100-SXM2-32GB”" in f["formula"]
    assert not [x for x in f["facts"] if x["unit"] == "bytes"]


def op_bytes(e: dict[str, Any]) -> int:
    """Bytes one call moves, read from the event's args with plain json: the tensors it reads (float32, 4 bytes;
    a "Scalar" argument is no tensor) and its output, the inputs' broadcast shape, or for `mean` with no dims
    given one element."""
    dims = [d for d, t in zip(e["args"]["Input Dims"], e["args"]["Input type"], strict=True) if t == "float"]
    if e["name"] == "aten::mean":
        return (math.prod(dims[0]) + 1) * 4
    rank = max(len(d) for d in dims)
    out = [max(d[len(d) - rank + i] if len(d) - rank + i >= 0 else 1 for d in dims) for i in range(rank)]
    return (sum(math.prod(d) for d in dims) + math.prod(out)) * 4


def test_a_host_only_run_prices_the_chain_by_its_bytes(store: RunStore, tmp_path: Path) -> None:
    """CPU ops: each costs its bytes at the rate the fastest-streaming op reached plus arithmetic; a fused call
    keeps the arithmetic and moves its distinct inputs and output once. Durations differ so the fastest op is
    the first mul (12 bytes per element in 10 µs) and the others carry arithmetic."""
    durs = [10, 14, 3, 2, 9, 12]
    ops = [Op(o.name, d, o.shapes, None, types=o.types) for o, d in zip(norm(64, 2048, 0), durs, strict=True)]
    path = build(ops * 2, tmp_path / "cpu.json")
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"][:6]
    moved = [op_bytes(e) for e in events]
    times = [int(e["dur"]) * US for e in events]
    best = max(range(6), key=lambda i: Fraction(moved[i], times[i]))
    assert best == 0
    fused, _ = floor_ns(path)  # the same bytes a fused kernel moves on a device
    saving = (sum(moved) - fused) * times[best] // moved[best]
    f = only(advise(store, path), "unfused-elementwise")
    assert f["saving_ns"] == 2 * saving and f["acts_on_ns"] == 2 * sum(times)
    assert 0 < saving < sum(times) - max(times)  # less than the device model's "keep the slowest op"
    facts = {x["label"]: x["value"] for x in f["facts"]}
    assert facts["bytes the chain's ops move, summed"] == 2 * sum(moved)
    assert facts["bytes one fused call moves, summed"] == 2 * fused
    assert facts["the fastest-streaming op's rate (median over occurrences)"] == moved[0] * 10**9 // times[0]
    assert "streamed fastest" in f["formula"] and "torch.compile" in f["fix"]  # F.rms_norm is no CPU fusion


def test_a_host_only_chain_without_dtypes_keeps_its_slowest_op(store: RunStore, tmp_path: Path) -> None:
    path = build([Op(o.name, o.dur, o.shapes, None) for o in norm(64, 2048, 0)], tmp_path / "cpu.json")
    f = only(advise(store, path), "unfused-elementwise")
    assert "host-only run" in f["formula"] and f["saving_ns"] == (6 * 10 - 10) * US
    assert not [x for x in f["facts"] if x["unit"] in ("bytes", "bytes_per_s")]


def test_host_only_attention_keeps_the_matmuls_and_the_arithmetic(store: RunStore, tmp_path: Path) -> None:
    """Scale and softmax between two matmuls on the CPU: a fused kernel never writes the score matrix, so the
    saving is the bytes the two ops move at the faster one's rate; the softmax's extra time is arithmetic."""
    q, s, f32 = [2, 4, 128, 64], [2, 4, 128, 128], ["float", "float"]
    ops = [Op("aten::matmul", 50, [q, [2, 4, 64, 128]], None, types=f32),
           Op("aten::div", 8, [s, []], None, types=["float", "Scalar"]),
           Op("aten::softmax", 30, [s, []], None, types=["float", "Scalar"]),
           Op("aten::matmul", 50, [s, q], None, types=f32)]
    path = build(ops, tmp_path / "attn.json")
    div_bytes = 2 * math.prod(s) * 4  # read the scores, write them
    soft_bytes = 2 * math.prod(s) * 4
    f = only(advise(store, path), "unfused-attention")
    assert f["saving_ns"] == (div_bytes + soft_bytes) * 8 * US // div_bytes  # twice the div: 16 µs of 38
    assert f["acts_on_ns"] == 138 * US and "never writes the score matrix" in f["formula"]


def test_distinct_inputs_of_one_shape_are_bounded_by_the_slowest_op_model(store: RunStore, tmp_path: Path) -> None:
    """(a * b + c) * d on four distinct [64, 2048] tensors: the trace names no tensors, so the fused call's bytes
    count the equal shapes once and the streaming model alone would claim 23.3 µs of 30; the saving is held to
    chain time − slowest op (20 µs), the model that bounds it."""
    x, f = [64, 2048], ["float", "float"]
    ops = [Op("aten::mul", 10, [x, x], None, types=f), Op("aten::add", 10, [x, x], None, types=f),
           Op("aten::mul", 10, [x, x], None, types=f)]
    path = build(ops, tmp_path / "abcd.json")
    f_ = only(advise(store, path), "unfused-elementwise")
    assert f_["saving_ns"] == (30 - 10) * US and "at most chain time − slowest op" in f_["formula"]
