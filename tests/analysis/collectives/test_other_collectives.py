"""Collectives outside NCCL (issue 34 point 6): symmetric-memory all-reduce kernels and host ops, matched
across ranks by order, listed per rank without a partner, counted as communication; the name table's
rows. Expected numbers are read from the constructed trace JSON with Decimal, not from the code."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from explorer.analysis.collectives import EXECUTIONS, OTHER_KERNELS
from explorer.analysis.kernels import categorize
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.store.runs import RunStore
from explorer.views.collectives import collectives_json
from tests.analysis.collectives.symm_mem import BASE_NS, NCCL_KERNEL, SYMM_KERNEL, SYMM_OP, write_run

CALLS = 73  # the capture of the issue: 73 symm_mem all-reduces ran, 1 collective was listed


def raw(files: list[Path], name: str) -> dict[int, list[dict[str, int]]]:
    """rank -> the events named `name` in start order: start, end and (kernels) the launch's start, ns."""
    out: dict[int, list[dict[str, int]]] = {}
    for f in files:
        doc = json.loads(f.read_text())
        ns = lambda us: BASE_NS + int(Decimal(str(us)) * 1000)  # noqa: E731
        launch = {e["args"]["correlation"]: ns(e["ts"]) for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel"}
        mine = sorted((e for e in doc["traceEvents"] if e.get("name") == name), key=lambda e: Decimal(e["ts"]))
        out[doc["distributedInfo"]["rank"]] = [
            {"start": ns(e["ts"]), "end": ns(e["ts"]) + int(Decimal(str(e["dur"])) * 1000),
             "arrival": launch.get(e["args"].get("correlation"), ns(e["ts"]))} for e in mine]
    return out


def _rows(store: RunStore, files: list[Path], name: str) -> tuple[list[Any], list[Any], int]:
    run = ingest_paths(store, files, name).id
    result = collectives_json(Run.of(store, run).collectives(), sort="start_ns")
    return result["rows"], result["mismatches"], store.get(run).summary.start_ns


def test_73_symm_mem_all_reduces_on_one_rank_are_73_rows(store: RunStore, tmp_path: Path) -> None:
    files = write_run(tmp_path / "tp1", world=1, calls=CALLS)
    truth = raw(files, SYMM_KERNEL)[0]
    assert len(truth) == CALLS
    rows, mismatches, origin = _rows(store, files, "symm_mem 1 rank")
    reduces = sorted((r for r in rows if r["name"] == "allreduce"), key=lambda r: r["ranks"][0]["start_ns"])
    assert len(reduces) == CALLS and mismatches == []
    assert [r["name"] for r in rows].count("broadcast") == 1  # the NCCL one, as before
    for row, t in zip(reduces, truth, strict=True):
        (only,) = row["ranks"]
        assert (only["rank"], only["start_ns"], only["end_ns"]) == (0, t["start"] - origin, t["end"] - origin)
        assert only["arrival_ns"] == t["arrival"] - origin  # the cudaLaunchKernel that launched it
        assert row["wait_ns"] == 0 and row["matched_by"] == "order"


def test_symm_mem_all_reduces_match_across_ranks_by_order(store: RunStore, tmp_path: Path) -> None:
    files = write_run(tmp_path / "tp2", world=2, calls=CALLS, skew_us=7)
    truth = raw(files, SYMM_KERNEL)
    rows, mismatches, origin = _rows(store, files, "symm_mem 2 ranks")
    reduces = sorted((r for r in rows if r["name"] == "allreduce"), key=lambda r: r["ranks"][0]["start_ns"])
    assert len(reduces) == CALLS and mismatches == []
    for k, row in enumerate(reduces):
        arrivals = {r: truth[r][k]["arrival"] - origin for r in (0, 1)}
        assert {x["rank"]: x["arrival_ns"] for x in row["ranks"]} == arrivals
        assert row["last_arriver"] == 1 and row["wait_ns"] == arrivals[1] - arrivals[0] == 7_000
        ends = max(truth[r][k]["end"] for r in (0, 1)) - max(truth[r][k]["start"] for r in (0, 1))
        assert row["transfer_ns"] == ends


def test_host_only_capture_lists_the_host_ops(store: RunStore, tmp_path: Path) -> None:
    files = write_run(tmp_path / "host", world=1, calls=CALLS, kernels=False)
    ops = raw(files, SYMM_OP)[0]
    rows, _, origin = _rows(store, files, "symm_mem host only")
    reduces = sorted((r for r in rows if r["name"] == "allreduce"), key=lambda r: r["ranks"][0]["start_ns"])
    assert [(r["ranks"][0]["start_ns"], r["ranks"][0]["end_ns"]) for r in reduces] == [
        (o["start"] - origin, o["end"] - origin) for o in ops]
    assert len(reduces) == CALLS
    assert [r["name"] for r in rows].count("broadcast") == 1  # c10d::broadcast_: no NCCL kernel recorded it


def test_symm_mem_kernels_count_as_communication(store: RunStore, tmp_path: Path) -> None:
    files = write_run(tmp_path / "k", world=1, calls=CALLS)
    run = ingest_paths(store, files, "symm_mem kernels").id
    table = Run.of(store, run).kernels().table
    rows = {r["name"]: r for r in table.select(["name", "category", "calls", "total_ns"]).to_pylist()}
    truth = raw(files, SYMM_KERNEL)[0]
    assert rows[SYMM_KERNEL]["category"] == "communication" == rows[NCCL_KERNEL]["category"]
    assert rows[SYMM_KERNEL]["calls"] == CALLS
    assert rows[SYMM_KERNEL]["total_ns"] == sum(t["end"] - t["start"] for t in truth)


# ---- the name tables, row by row -------------------------------------------------------------------

KERNEL_NAMES = [  # (kernel name as Kineto writes it, the collective's name)
    (SYMM_KERNEL, "allreduce"),
    ("void (anonymous namespace)::one_shot_all_reduce_kernel<float, 16, 8>(float**, unsigned long)", "allreduce"),
    ("void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<c10::BFloat16, 16, 8>(c10::BFloat16**)",
     "allreduce"),
    ("void (anonymous namespace)::multimem_all_gather_kernel<16>(char*, char*, unsigned long)", "allgather"),
    ("void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)", "allreduce"),
    ("void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*, float*, int*)", "alltoall"),
    ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*, float*)", "alltoall"),
    ("nvshmemi_float_alltoall_kernel", "nvshmem"),
]
HOST_OPS = [  # (host op, source, group 1); None: not a collective execution
    ("symm_mem::multimem_all_reduce_", "symm_mem", "all_reduce"),
    ("symm_mem::one_shot_all_reduce", "symm_mem", "all_reduce"),
    ("symm_mem::two_shot_all_reduce_", "symm_mem", "all_reduce"),
    ("symm_mem::multimem_all_gather_out", "symm_mem", "all_gather"),
    ("symm_mem::fused_all_gather_matmul", None, None),  # a fused matmul: compute with a gather inside
    ("c10d::allreduce_", "c10d", "allreduce_"),
    ("c10d_functional::all_reduce", "c10d", "all_reduce"),
    ("_c10d_functional::all_gather_into_tensor", "c10d", "all_gather_into_tensor"),
    ("_c10d_functional::wait_tensor", None, None),
    ("nccl:all_to_all", "nccl_host", "all_to_all"),  # ProcessGroupNCCL's host annotation
    ("rcclKernel_AllReduce_RING_LL_Sum_float", "nccl", "AllReduce"),  # RCCL on ROCm
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "nccl", "Generic"),
]


def _source(name: str, cat: str) -> tuple[str | None, str | None]:

    for source, pattern, cats in EXECUTIONS:
        m = re.search(pattern, name)
        if m and (not cats or cat in cats):
            return source, next((g for g in m.groups() if g), None)
    return None, None


@pytest.mark.parametrize(("name", "collective"), KERNEL_NAMES)
def test_other_kernel_rows(name: str, collective: str) -> None:

    assert _source(name, "kernel")[0] == "kernel"
    assert [n for pattern, n, _ in OTHER_KERNELS if re.search(pattern, name)] == [collective]
    assert categorize(pa.array([name]), pa.array(["kernel"])).to_pylist() == ["communication"]
    assert _source(name, "cpu_op") == (None, None)  # a kernel's name on a host op is not an execution


@pytest.mark.parametrize(("name", "source", "group"), HOST_OPS)
def test_host_op_rows(name: str, source: str | None, group: str | None) -> None:
    assert _source(name, "kernel" if source == "nccl" else "cpu_op") == (source, group)


def test_every_other_kernel_row_has_a_case_and_a_source_note() -> None:

    assert all(note for _, _, note in OTHER_KERNELS)
    assert all(any(re.search(p, n) for n, _ in KERNEL_NAMES) for p, _, _ in OTHER_KERNELS)


@pytest.mark.shared
def test_a_host_only_nccl_capture_lists_its_nccl_annotations(shared_traces: Path, store: RunStore) -> None:
    """HTA's rank_non_gpu: CPU only, 6 `nccl:all_to_all` annotations, record_param_comms without args (older
    torch): 0 collectives were listed, 6 ran."""
    path = shared_traces / "HolisticTraceAnalysis" / "tests" / "data" / "mixed_files" / "rank_non_gpu.json.gz"
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    ns = lambda us: int(Decimal(str(us)) * 1000)  # noqa: E731
    marks = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events if e["name"] == "nccl:all_to_all")
    assert len(marks) == 6
    run = ingest_paths(store, [path], "rank_non_gpu").id
    result = collectives_json(Run.of(store, run).collectives(), sort="+start_ns")
    origin = store.get(run).summary.start_ns
    assert result["total"] == 6 and {r["name"] for r in result["rows"]} == {"alltoall"}
    assert [(r["ranks"][0]["start_ns"] + origin, r["ranks"][0]["end_ns"] + origin) for r in result["rows"]] == marks
