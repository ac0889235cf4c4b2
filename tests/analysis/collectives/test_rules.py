"""The collectives' rule tables, row by row: name normalisation across sources and the busbw factors."""

from __future__ import annotations

from fractions import Fraction

import pytest

from explorer.analysis.collectives import BUS_FACTORS, DTYPE_BYTES, normalize_name


@pytest.mark.parametrize(("raw", "name"), [
    ("allreduce", "allreduce"), ("AllReduce", "allreduce"), ("c10d::allreduce_", "allreduce"),
    ("gloo:all_reduce", "allreduce"), ("nccl:all_reduce", "allreduce"), ("c10d::_allgather_base_", "allgather"),
    ("nccl:_all_gather_base", "allgather"), ("all_gather_into_tensor", "allgather"),
    ("_reduce_scatter_base", "reducescatter"), ("ReduceScatter", "reducescatter"), ("c10d::alltoall_base_", "alltoall"),
    ("nccl:all_to_all", "alltoall"), ("SendRecv", "sendrecv"), ("c10d::broadcast_", "broadcast"),
    ("allreduce_coalesced", "allreduce"),
])
def test_names_from_every_source_normalise_alike(raw: str, name: str) -> None:
    assert normalize_name(raw) == name


@pytest.mark.parametrize(("name", "n", "factor"), [
    ("allreduce", 4, Fraction(3, 2)), ("allreduce", 2, Fraction(1)), ("allgather", 8, Fraction(7, 8)),
    ("reducescatter", 4, Fraction(3, 4)), ("alltoall", 2, Fraction(1, 2)), ("broadcast", 16, Fraction(1)),
    ("reduce", 3, Fraction(1)), ("sendrecv", 2, Fraction(1)),
])
def test_bus_factors_are_nccl_tests(name: str, n: int, factor: Fraction) -> None:
    assert BUS_FACTORS[name](n) == factor


def test_dtype_sizes() -> None:
    assert [DTYPE_BYTES[k] for k in ("float", "half", "bfloat16", "long", "byte", "double")] == [4, 2, 2, 8, 1, 8]
