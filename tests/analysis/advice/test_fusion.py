"""The unfused-elementwise rule's bytes-at-bandwidth floor on a known device: a fused kernel moves the chain's
distinct inputs and its output once, at the device's memory bandwidth (the H100 SXM datasheet's 3,350 GB/s,
written here); the saving keeps max(that floor, the slowest op). Recomputed from the file with plain json."""

from __future__ import annotations

import json
import math
from pathlib import Path

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


def test_a_host_only_run_has_no_floor(store: RunStore, tmp_path: Path) -> None:
    path = build([Op(o.name, o.dur, o.shapes, None, types=o.types) for o in norm(64, 2048, 0)], tmp_path / "cpu.json")
    f = only(advise(store, path), "unfused-elementwise")
    assert "host-only run" in f["formula"] and f["saving_ns"] == (6 * 10 - 10) * US
