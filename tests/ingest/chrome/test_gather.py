"""The compiled gather (explorer/ingest/chrome/_gather.c through explorer.ingest.chrome.gather.take_text): the values Arrow's
own take gives, checked against Python's indexing of the column's values, for every shape a column comes in
(one array or chunks, sliced arrays, empty values and chunks, unicode, repeats, any order), and Arrow's take
where the gather does not apply (nulls, another type, no library)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from explorer.ingest.chrome import gather
from explorer.ingest.chrome.gather import take_text

VALUES = ["", "a", '{"External id": 7}', "naïve ✓ 漢字", "x" * 5000, "", "last"]


def expected(values: list[str | None], index: np.ndarray) -> list[str | None]:
    return [values[i] for i in index.tolist()]


@pytest.fixture(autouse=True)
def built() -> None:
    assert gather._LIB is not None, f"{gather.LIBRARY} is not built (python hatch_build.py builds it)"


def test_one_array_in_any_order_with_repeats() -> None:
    rng = np.random.default_rng(1)
    index = rng.integers(0, len(VALUES), 500)
    out = take_text(pa.array(VALUES), index)
    assert out.type == pa.string() and out.to_pylist() == expected(VALUES, index)
    assert out.equals(pa.chunked_array([pa.array(VALUES).take(pa.array(index))]))


def test_chunks_sliced_arrays_and_empty_chunks() -> None:
    whole = pa.array(["pad0", "pad1", *VALUES, "pad2"])
    sliced = whole.slice(2, len(VALUES))  # offsets that do not start at the buffer's start
    column = pa.chunked_array([pa.array([], pa.string()), sliced.slice(0, 3), pa.array(["", ""]), sliced.slice(3)])
    flat = column.to_pylist()
    index = np.array([len(flat) - 1, 0, 3, 4, 4, 2, 5, 1, 8, 6, 7])
    assert take_text(column, index).to_pylist() == expected(flat, index)


def test_all_empty_values_and_an_empty_index() -> None:
    empty_values = pa.array(["", "", ""])
    assert take_text(empty_values, np.array([2, 0])).to_pylist() == ["", ""]
    out = take_text(pa.array(VALUES), np.zeros(0, np.int64))
    assert len(out) == 0 and out.type == pa.string()


def test_an_index_outside_the_column_is_refused() -> None:
    with pytest.raises(IndexError):
        take_text(pa.array(VALUES), np.array([0, len(VALUES)]))
    with pytest.raises(IndexError):
        take_text(pa.array(VALUES), np.array([-1]))


@pytest.mark.parametrize("column", [
    pa.array(["a", None, "c"]),  # nulls
    pa.array(["a", "b", "c"], pa.large_string()),  # 64-bit offsets
    pa.chunked_array([pa.array(["a"]), pa.array([None, "c"], pa.string())]),
], ids=["nulls", "large_string", "a chunk with nulls"])
def test_columns_the_gather_does_not_take_go_through_arrows_take(column: pa.Array | pa.ChunkedArray) -> None:
    index = np.array([2, 1, 0, 2])
    out = take_text(column, index)
    assert out.to_pylist() == expected(column.to_pylist(), index)


def test_a_gather_past_the_string_limit_is_cut_into_several_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """More than 2 GiB of text does not fit one string array: the gather is halved until each part does (the
    limit lowered here to show it on a few values)."""
    monkeypatch.setattr(gather, "MAX_BYTES", 6000)
    index = np.array([4, 2, 4, 3, 6, 4, 1])
    out = take_text(pa.array(VALUES), index)
    assert out.num_chunks > 1 and all(c.nbytes < 6000 + 8 * len(c) + 8 for c in out.chunks)
    assert out.to_pylist() == expected(VALUES, index)


def test_without_the_library_the_values_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    index = np.array([6, 0, 3, 3])
    compiled = take_text(pa.array(VALUES), index)
    monkeypatch.setattr(gather, "_LIB", None)
    assert take_text(pa.array(VALUES), index).equals(compiled)


def test_rows_of_a_batch_are_a_copy_with_every_column_type() -> None:
    """take_rows (the fast readers' batches cut to their complete events and flow steps): the rows Arrow's
    filter keeps, text gathered, other columns taken, nothing sharing the batch's buffers."""
    batch = pa.record_batch({"name": pa.array(VALUES), "n": pa.array(range(len(VALUES)), pa.int64()),
                             "maybe": pa.array(["a", None, "c", None, "e", "f", "g"])})
    keep = np.array([True, False, True, True, False, False, True])
    out = gather.take_rows(batch, ["name", "n", "maybe"], np.flatnonzero(keep))
    assert out.equals(batch.filter(pa.array(keep)))
    batch_buffers = {b.address for column in batch.columns for b in column.buffers() if b is not None}
    assert not batch_buffers & {b.address for column in out.columns for b in column.buffers() if b is not None}
