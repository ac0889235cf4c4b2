"""Each advisor rule on constructed Kineto traces: one where it fires, with its numbers recomputed from the file
with plain json, and one where it must not (a well-fused, device-bound run gets no finding at all)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from explorer.model.advice_shapes import AdviceResult, Finding
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.advice import compute_run_advice
from tests.analysis.advice.builder import Op, build, rmsnorm_ops

US = 1000


def advise(store: RunStore, path: Path) -> AdviceResult:
    return compute_run_advice(Run.of(store, ingest_paths(store, [path]).id))


def only(advice: AdviceResult, rule: str) -> Finding:
    found = [f for f in advice["findings"] if f["rule"] == rule]
    assert len(found) == 1, [f["rule"] for f in advice["findings"]]
    return found[0]


def events(path: Path, cat: str) -> list[dict[str, Any]]:
    return sorted((e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == cat and e["ph"] == "X"),
                  key=lambda e: e["ts"])


def device_gaps_us(path: Path) -> list[int]:
    k = events(path, "kernel")
    return [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(k, k[1:], strict=False) if b["ts"] > a["ts"] + a["dur"]]


def fused_device_bound(tmp_path: Path) -> Path:
    return build([Op("aten::rms_norm", 10, [[64, 2048], [2048]], kernel=50), Op("aten::addmm", 10, [[64, 2048]], 80)]
                 * 6, tmp_path / "fused.json")


def test_a_well_fused_device_bound_run_gets_no_finding(store: RunStore, tmp_path: Path) -> None:
    path = fused_device_bound(tmp_path)
    assert device_gaps_us(path) == []  # the device never waits
    advice = advise(store, path)
    assert advice["time_basis"] == "device"
    assert advice["findings"] == []


def test_hand_written_rmsnorm_on_a_device(store: RunStore, tmp_path: Path) -> None:
    kernels = [20, 12, 3, 3, 20, 21]
    ops = []
    for _ in range(3):
        ops += [Op(o.name, o.dur, o.shapes, k) for o, k in zip(rmsnorm_ops(0), kernels, strict=True)]
        ops.append(Op("aten::addmm", 10, [[64, 2048], [2048, 2048]], 200))  # the layer between two norms
    path = build(ops, tmp_path / "rms.json")
    f = only(advise(store, path), "unfused-elementwise")
    k = [e["dur"] for e in events(path, "kernel")]
    chains = [k[i:i + 6] for i in range(0, len(k), 7)]
    assert f["acts_on_ns"] == sum(sum(c) for c in chains) * US
    assert f["saving_ns"] == sum(sum(c) - max(c) for c in chains) * US
    assert "RMSNorm" in f["title"] and "rms_norm" in f["fix"]
    assert {x["label"]: x["value"] for x in f["facts"]}["occurrences"] == 3


def test_a_chain_on_different_rows_is_not_one_chain(store: RunStore, tmp_path: Path) -> None:
    ops = [Op("aten::mul", 10, [[64, 2048], [64, 2048]], 20), Op("aten::add", 10, [[32, 512], []], 20),
           Op("aten::mul", 10, [[8, 16], [8, 16]], 20)]
    assert not [f for f in advise(store, build(ops, tmp_path / "x.json"))["findings"]
                if f["rule"] == "unfused-elementwise"]


def test_manual_attention(store: RunStore, tmp_path: Path) -> None:
    q, s = [2, 4, 128, 64], [2, 4, 128, 128]
    ops = [Op("aten::matmul", 10, [q, [2, 4, 64, 128]], 40), Op("aten::div", 10, [s, []], 15),
           Op("aten::softmax", 10, [s, []], 25), Op("aten::matmul", 10, [s, q], 40)] * 2
    path = build(ops, tmp_path / "attn.json")
    advice = advise(store, path)
    f = advice["findings"][0]
    assert f["rule"] == "unfused-attention"
    k = [e["dur"] for e in events(path, "kernel")]
    assert f["saving_ns"] == (k[1] + k[2] + k[5] + k[6]) * US and f["acts_on_ns"] == sum(k) * US
    assert "scaled_dot_product_attention" in f["fix"]
    assert not [g for g in advice["findings"] if g["rule"] == "unfused-elementwise"]  # counted once


def test_host_bound_device(store: RunStore, tmp_path: Path) -> None:
    ops = [Op("aten::addmm", 5, [[64, 64]], 10, gap_before=300, busy_name="tokenize") for _ in range(5)]
    path = build(ops, tmp_path / "host.json")
    f = only(advise(store, path), "host-bound")
    gaps = device_gaps_us(path)
    assert len(gaps) == 4 and f["saving_ns"] == sum(gaps) * US
    assert "tokenize" in f["title"]
    assert f["evidence"][0]["path"].startswith("/runs/") and "timeline?start=" in f["evidence"][0]["path"]


def test_launch_bound_device(store: RunStore, tmp_path: Path) -> None:
    path = build([Op("aten::add", 8, [[16]], kernel=1, launch=5) for _ in range(30)], tmp_path / "launch.json")
    f = only(advise(store, path), "launch-bound")
    launches = events(path, "cuda_runtime")
    kernels = events(path, "kernel")
    excess = sum(la["dur"] - k["dur"] for la, k in zip(launches, kernels, strict=True) if k["dur"] < la["dur"])
    assert f["saving_ns"] == min(excess, sum(device_gaps_us(path))) * US
    assert {x["label"]: x["value"] for x in f["facts"]}["executions shorter than their launch"] == 30


def test_sync_points(store: RunStore, tmp_path: Path) -> None:
    path = build([Op("aten::addmm", 10, [[64, 64]], 30, sync=50) for _ in range(4)], tmp_path / "sync.json")
    f = only(advise(store, path), "sync-points")
    assert f["saving_ns"] == sum(device_gaps_us(path)) * US
    no_sync = build([Op("aten::addmm", 10, [[64, 64]], 30) for _ in range(4)], tmp_path / "nosync.json")
    assert "sync-points" not in {g["rule"] for g in advise(store, no_sync)["findings"]}


@pytest.mark.parametrize(("name", "fires"), [("Memcpy HtoD (Pageable -> Device)", True),
                                             ("Memcpy HtoD (Pinned -> Device)", False)])
def test_pageable_copies(store: RunStore, tmp_path: Path, name: str, fires: bool) -> None:
    path = build([Op("aten::copy_", 10, [[64, 64]], 40, kernel_name=name), Op("aten::addmm", 10, [[64]], 80)] * 3,
                 tmp_path / "copy.json")
    found = [f for f in advise(store, path)["findings"] if f["rule"] == "pageable-copies"]
    if not fires:
        assert not found
        return
    copies = [e["dur"] for e in events(path, "kernel") if "Pageable" in e["name"]]
    assert found[0]["acts_on_ns"] == sum(copies) * US and found[0]["saving_ns"] == sum(copies) * US // 2


@pytest.mark.parametrize(("wait", "fires"), [(400, True), (1, False)])
def test_dataloader_stalls(store: RunStore, tmp_path: Path, wait: int, fires: bool) -> None:
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    path = build([Op("aten::addmm", 100, [[64]], 90, gap_before=wait, busy_name=loader) for _ in range(5)],
                 tmp_path / "dl.json")
    found = [f for f in advise(store, path)["findings"] if f["rule"] == "dataloader-stalls"]
    assert bool(found) == fires
    if fires:
        waits = [e["dur"] for e in events(path, "user_annotation") if e["name"] == loader]
        assert found[0]["saving_ns"] == sum(waits[1:-1]) * US  # the first and last fetch left out
        assert "num_workers" in found[0]["fix"]


def test_host_only_chain_uses_cpu_time(store: RunStore, tmp_path: Path) -> None:
    ops = rmsnorm_ops(None)
    ops[0].dur = 40
    path = build(ops, tmp_path / "cpu.json")
    advice = advise(store, path)
    assert advice["time_basis"] == "cpu"
    f = only(advice, "unfused-elementwise")
    durs = [e["dur"] for e in events(path, "cpu_op")]
    assert f["saving_ns"] == (sum(durs) - max(durs)) * US


H100_BF16_DENSE = 1_979 * 10**12 // 2  # FLOP/s: the NVIDIA H100 SXM datasheet's 1,979 TFLOPS with sparsity, halved
H100_HBM = 3_350 * 10**9  # bytes/s


def test_gemm_efficiency_against_the_device_peak(store: RunStore, tmp_path: Path) -> None:
    a, b = [4096, 4096], [4096, 8192]
    ops = [Op("aten::mm", 10, [a, b], kernel=300, types=["c10::BFloat16", "c10::BFloat16"]) for _ in range(3)]
    path = build(ops, tmp_path / "mm.json", device="NVIDIA H100 80GB HBM3")
    advice = advise(store, path)
    assert advice["device"] == "NVIDIA H100 80GB HBM3" and advice["peak"] is not None
    (row,) = advice["efficiency"]
    kernels = events(path, "kernel")
    flops = sum(2 * 4096 * 8192 * 4096 for _ in kernels)
    assert (row["calls"], row["flops"], row["time_ns"]) == (3, flops, sum(k["dur"] for k in kernels) * US)
    assert row["bytes"] == 3 * (4096 * 4096 + 4096 * 8192 + 4096 * 8192) * 2
    assert (row["peak_flops_per_s"], row["peak_bytes_per_s"]) == (H100_BF16_DENSE, H100_HBM)
    # 2·4096·8192·4096 FLOP in 300 µs: 916 TFLOP/s, 92.6 % of the H100's 989.5
    assert round(100 * row["flops"] * 10**9 / row["time_ns"] / H100_BF16_DENSE, 1) == 92.6


def test_unknown_device_gets_no_peak(store: RunStore, tmp_path: Path) -> None:
    ops = [Op("aten::mm", 10, [[64, 64], [64, 64]], kernel=5, types=["float", "float"])]
    advice = advise(store, build(ops, tmp_path / "mm.json", device="Tesla V100-SXM2-32GB"))
    assert advice["peak"] is None
    assert advice["efficiency"][0]["peak_flops_per_s"] is None and advice["efficiency"][0]["flops"] == 2 * 64**3


@pytest.mark.parametrize(("occupancy", "fires"), [(12.5, True), (60.0, False)])
def test_low_occupancy(store: RunStore, tmp_path: Path, occupancy: float, fires: bool) -> None:
    launch = {"grid": [4, 1, 1], "block": [1024, 1, 1], "registers per thread": 128,
              "est. achieved occupancy %": occupancy}
    path = build([Op("aten::addmm", 10, [[64, 64]], 100, kernel_name="sgemm_small", kargs=launch)] * 3,
                 tmp_path / "occ.json")
    found = [f for f in advise(store, path)["findings"] if f["rule"] == "low-occupancy"]
    assert bool(found) == fires
    if fires:
        assert found[0]["saving_ns"] is None  # not timed
        assert found[0]["acts_on_ns"] == sum(e["dur"] for e in events(path, "kernel")) * US
        assert {x["label"]: x["value"] for x in found[0]["facts"]}["its est. occupancy"] == 125_000  # 12.5 %


def test_a_chain_in_the_optimizer_step_gets_the_fused_optimizer(store: RunStore, tmp_path: Path) -> None:
    from tests.analysis.advice.builder import Trace

    t = Trace()
    for _ in range(4):
        t.add(Op("aten::mul_", 10, [[64], []], 5))
        t.add(Op("aten::add_", 10, [[64], [64]], 5))
        t.add(Op("aten::add_", 10, [[64], [64]], 6))
    t.events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1, "tid": 1,
                     "ts": 0, "dur": t.host, "args": {}})
    path = t.write(tmp_path / "opt.json")
    f = only(advise(store, path), "unfused-elementwise")
    assert f["title"].startswith("Fuse the optimizer update") and "torch.optim.SGD(" in f["fix"]
    k = [e["dur"] for e in events(path, "kernel")]  # four repetitions of mul_ -> add_ -> add_: four occurrences
    assert f["saving_ns"] == sum(sum(k[i:i + 3]) - max(k[i:i + 3]) for i in range(0, 12, 3)) * US


def test_a_norm_called_three_times_in_a_row_is_three_occurrences(store: RunStore, tmp_path: Path) -> None:
    kernels = [20, 12, 3, 3, 20, 21]
    ops = [Op(o.name, o.dur, o.shapes, k) for _ in range(3) for o, k in zip(rmsnorm_ops(0), kernels, strict=True)]
    path = build(ops, tmp_path / "rms3.json")
    f = only(advise(store, path), "unfused-elementwise")
    assert "6 ops" in f["title"] and {x["label"]: x["value"] for x in f["facts"]}["occurrences"] == 3
    k = [e["dur"] for e in events(path, "kernel")]
    assert f["saving_ns"] == sum(sum(k[i:i + 6]) - max(k[i:i + 6]) for i in range(0, 18, 6)) * US


def test_zero_occupancy_is_not_a_reading(store: RunStore, tmp_path: Path) -> None:
    path = build([Op("aten::add", 10, [[64]], 100, kargs={"est. achieved occupancy %": 0})] * 3, tmp_path / "o.json")
    assert "low-occupancy" not in {f["rule"] for f in advise(store, path)["findings"]}
