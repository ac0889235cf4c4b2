"""How the store writes Parquet: a dictionary only where values repeat, and the slices' row groups made one
ahead of the encoder (explorer.store.parquet)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from explorer.service import ingest_paths
from explorer.store.parquet import ahead
from explorer.store.runs import RunStore


def test_ahead_gives_every_item_in_order_made_in_another_thread() -> None:
    makers: list[str] = []

    def items() -> Iterator[int]:
        for i in range(5):
            makers.append(threading.current_thread().name)
            yield i

    assert list(ahead(items())) == [0, 1, 2, 3, 4]
    assert makers and all(name.startswith("parquet-ahead") for name in makers)
    assert list(ahead(iter([]))) == []


def test_ahead_raises_an_error_in_place_of_the_item_that_failed() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise ValueError("row group 2 could not be made")

    got = []
    with pytest.raises(ValueError, match="row group 2"):
        for item in ahead(items()):
            got.append(item)
    assert got == [1]


def test_ahead_stops_making_items_when_the_caller_stops() -> None:
    made = []

    def items() -> Iterator[int]:
        for i in range(1000):
            made.append(i)
            yield i

    stream = ahead(items())
    assert next(stream) == 0
    stream.close()  # the caller failed writing item 0: at most the one after it was made
    assert len(made) <= 2


def test_stored_slices_keep_a_dictionary_only_for_repeating_columns(store: RunStore, tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 3}", "pid": 1, "tid": 1 + i % 2,
               "ts": 10 * i, "dur": 5, "args": {"External id": i}} for i in range(2000)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rec = ingest_paths(store, [path], "t")
    meta = pq.ParquetFile(store.table_path(rec.id, "slices")).metadata
    encodings = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).encodings
                 for i in range(meta.num_columns)}
    for repeating in ("name", "cat", "lane", "track_id", "depth"):
        assert "RLE_DICTIONARY" in encodings[repeating], repeating
    for unique in ("slice_id", "ts_ns", "external_id", "args"):
        assert "RLE_DICTIONARY" not in encodings[unique], unique
    slices = store.table(rec.id, "slices")
    assert sorted(slices.column("name").unique().to_pylist()) == ["aten::op0", "aten::op1", "aten::op2"]
    assert sorted(slices.column("ts_ns").to_pylist()) == [10_000 * i for i in range(2000)]
