"""OrderedArgs puts spilled args in slice order: checked against Python indexing of the same values, held in
memory or through bucket files of every size, with the number of bucket files kept below MAX_BUCKETS (each is an
open file in the first pass)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from explorer.ingest.chrome import spill
from explorer.ingest.chrome.spill import ArgsSpillWriter, OrderedArgs, Segment


def spilled(values: list[str], batch: int, folder: Path) -> list[Segment]:
    writer = ArgsSpillWriter(folder)
    segments: list[Segment] = [writer.write(pa.array(values[lo:lo + batch], pa.string()))
                               for lo in range(0, len(values), batch)]
    writer.close()
    return segments


@pytest.mark.parametrize("budget", [1, 5_000, 40_000, 10**9])  # one row group a bucket .. all held
def test_batches_are_the_args_in_slice_order(tmp_path: Path, budget: int) -> None:
    rng = np.random.default_rng(budget)
    values = [f'{{"i": {i}, "pad": "{"x" * int(rng.integers(0, 40))}é"}}' for i in range(5_000)]
    order = rng.permutation(len(values))
    args = OrderedArgs(spilled(values, 700, tmp_path), order, tmp_path, budget)
    batches = list(args.batches(256))
    assert [len(b) for b in batches[:-1]] == [256] * (len(batches) - 1)
    assert pa.chunked_array(batches).to_pylist() == [values[i] for i in order]
    assert list(tmp_path.glob("*.bucket*")) == []  # every bucket file removed


def test_bucket_files_stay_below_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "MAX_BUCKETS", 4)
    values = [f"v{i}" for i in range(3_000)]
    order = np.arange(len(values))[::-1].copy()
    made: list[str] = []
    real = spill._temp_file

    def counted(folder: Path | None, suffix: str) -> Path:
        made.append(suffix)
        return real(folder, suffix)

    monkeypatch.setattr(spill, "_temp_file", counted)
    args = OrderedArgs(spilled(values, 500, tmp_path), order, tmp_path, budget_bytes=1)  # one row group a bucket
    assert pa.chunked_array(list(args.batches(100))).to_pylist() == values[::-1]
    buckets = [s for s in made if ".bucket" in s]
    assert 0 < len(buckets) <= 4  # 30 row groups: 30 buckets without the cap


def test_more_buckets_than_a_byte_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 256 buckets (a raised cap) the bucket numbers are sorted in a wider type, and still in order."""
    monkeypatch.setattr(spill, "MAX_BUCKETS", 1_000)
    values = [f"v{i}" for i in range(3_000)]
    order = np.random.default_rng(7).permutation(len(values))
    args = OrderedArgs(spilled(values, 500, tmp_path), order, tmp_path, budget_bytes=1)  # 8 rows a bucket
    assert pa.chunked_array(list(args.batches(8))).to_pylist() == [values[i] for i in order]


def test_a_bucket_missing_a_position_is_an_error() -> None:
    """A bucket's rows are put in order by inverting their positions: a position twice (so another one
    missing) must fail rather than write some slice's args twice."""
    assert spill._inverse(np.array([12, 10, 11]), 10).tolist() == [1, 2, 0]
    with pytest.raises(ValueError, match="missing positions"):
        spill._inverse(np.array([12, 10, 12]), 10)


def test_spilled_args_read_back_mapped_outlive_their_file(tmp_path: Path) -> None:
    """A spilled batch is read as a mapping of its file: its values stay readable after the file is removed
    (the scratch folder goes once the run is written; a mapping keeps its pages)."""
    values = [f'{{"i": {i}}}' for i in range(1_000)]
    segments = spilled(values, 300, tmp_path)
    read = [seg.read() if not isinstance(seg, pa.Array) else seg for seg in segments]
    for path in tmp_path.glob("*.args.arrow"):
        path.unlink()
    assert pa.chunked_array(read).to_pylist() == values
