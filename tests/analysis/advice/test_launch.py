"""small-grid and blocking-copy on constructed Kineto traces: where each fires, with its numbers recomputed from the
file with plain json, and where it must not (big grids, no numSms; non-blocking or host-to-device copies)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from explorer.store.runs import RunStore
from tests.analysis.advice.builder import Op, build
from tests.analysis.advice.test_engine_rules import US, advise, only

DTOH = "Memcpy DtoH (Device -> Pageable)"


def grid_ops(blocks: int) -> list[Op]:
    small = {"grid": [blocks, 1, 1], "block": [256, 1, 1]}
    return [Op("aten::addmm", 10, [[64, 64]], 40, kargs={"grid": [512, 1, 1], "block": [128, 1, 1]}),
            Op("aten::sum", 10, [[64, 64]], 30, kernel_name="reduce_kernel", kargs=small)] * 4


def device_events(path: Path) -> list[dict[str, Any]]:
    return sorted((e for e in json.loads(path.read_text())["traceEvents"]
                   if e.get("cat") in ("kernel", "gpu_memcpy") and e["ph"] == "X"), key=lambda e: e["ts"])


def test_small_grid_fires_below_the_sm_count(store: RunStore, tmp_path: Path) -> None:
    path = build(grid_ops(8), tmp_path / "small.json", "NVIDIA H100 80GB HBM3", sms=132)
    f = only(advise(store, path), "small-grid")
    doc = json.loads(path.read_text())
    sms = doc["deviceProperties"][0]["numSms"]
    small = [e for e in device_events(path) if math.prod(e["args"]["grid"]) < sms]
    facts = {x["label"]: x["value"] for x in f["facts"]}
    assert f["saving_ns"] is None and f["acts_on_ns"] == sum(e["dur"] for e in small) * US
    assert facts["executions"] == len(small) == 4 and facts["SMs (numSms)"] == 132
    assert facts["SM time the grids leave idle, per SM"] == sum(e["dur"] * US * (132 - 8) // 132 for e in small)
    assert "reduce_kernel" in f["title"]


def test_small_grid_stays_quiet_on_full_grids_collectives_and_without_numsms(store: RunStore, tmp_path: Path) -> None:
    nccl = [Op(o.name, o.dur, o.shapes, o.kernel, kernel_name="ncclKernel_AllReduce_RING_LL_Sum_float" if
               o.kernel_name else "", kargs=o.kargs) for o in grid_ops(8)]  # collectives use few blocks by design
    for path in (build(grid_ops(264), tmp_path / "full.json", "NVIDIA H100 80GB HBM3", sms=132),
                 build(grid_ops(8), tmp_path / "nosms.json", "NVIDIA H100 80GB HBM3"),
                 build(nccl, tmp_path / "nccl.json", "NVIDIA H100 80GB HBM3", sms=132)):
        assert not [f for f in advise(store, path)["findings"] if f["rule"] == "small-grid"]


def copy_ops(sync: int, name: str = DTOH) -> list[Op]:
    ops = []
    for _ in range(4):
        ops += [Op("aten::addmm", 10, [[64, 64]], 50),
                Op("aten::copy_", 50, [[64, 64], [64, 64]], 5, kernel_name=name, kernel_cat="gpu_memcpy",
                   launch_name="cudaMemcpyAsync", inner_sync=sync)]
    return ops


def gaps_after(path: Path) -> tuple[int, int]:
    """(device idle that starts where a DtoH copy ends, all device idle between executions), in ns."""
    ev = device_events(path)
    end = 0
    after = idle = 0
    for a, b in zip(ev, ev[1:], strict=False):
        end = max(end, a["ts"] + a["dur"])
        if b["ts"] > end:
            idle += b["ts"] - end
            if "DtoH" in a["name"] and a["ts"] + a["dur"] == end:
                after += b["ts"] - end
    return after * US, idle * US


def test_blocking_copy_is_timed_by_the_idle_after_each_copy(store: RunStore, tmp_path: Path) -> None:
    path = build(copy_ops(45), tmp_path / "blocking.json")
    after, idle = gaps_after(path)
    assert after > 0
    f = only(advise(store, path), "blocking-copy")
    assert f["saving_ns"] == after and f["acts_on_ns"] == idle
    facts = {x["label"]: x["value"] for x in f["facts"]}
    assert facts["blocking DtoH copies"] == 4 and facts["their device time"] == 4 * 5 * US
    assert "non_blocking=True" in f["fix"]


def test_no_blocking_copy_without_a_wait_or_for_host_to_device(store: RunStore, tmp_path: Path) -> None:
    for path in (build(copy_ops(0), tmp_path / "async.json"),
                 build(copy_ops(45, "Memcpy HtoD (Pageable -> Device)"), tmp_path / "htod.json")):
        assert not [f for f in advise(store, path)["findings"] if f["rule"] == "blocking-copy"]
