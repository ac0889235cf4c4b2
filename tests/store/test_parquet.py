"""How the store writes Parquet: a dictionary only where values repeat, and the slices' row groups made one
ahead of the encoder (explorer.store.parquet)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from explorer.ingest.chrome import fast as chrome_fast
from explorer.model.tables import SLICES
from explorer.runs.ingest import ingest_paths
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


@pytest.mark.parametrize("spilled", [False, True])  # args held (small files), args joined by row group (big ones)
@pytest.mark.parametrize("distinct", [3, 20_000])  # names written as a dictionary as held; decoded first
def test_stored_slices_read_back_as_text_whatever_the_names(store: RunStore, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, spilled: bool,
                                                            distinct: int) -> None:
    """The ingest holds names, categories, lanes and shapes as dictionaries; the file reads back with the
    slices schema's text columns, the names the trace gave, every row group's dictionary no bigger than its
    own names (20,000 distinct names, ~9,400 in each row group: ~0.9 MB, past DIRECT_DICTIONARY_BYTES, so
    decoded and encoded per row group)."""
    if spilled:
        monkeypatch.setattr(chrome_fast, "SPILL_MIN_BYTES", 0)
    n = 140_000  # three row groups
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::operator_with_a_long_name_{i * distinct // n:06d}", "pid": 1,
               "tid": 1, "ts": 10 * i, "dur": 5, "args": {"Input Dims": [[i % 5]]}} for i in range(n)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rec = ingest_paths(store, [path], "t")
    file = pq.ParquetFile(store.table_path(rec.id, "slices"))
    assert file.schema_arrow == SLICES
    slices = file.read()
    assert slices.column("name").to_pylist() == [e["name"] for e in events]  # one thread: file order is time order
    assert slices.column("shapes").to_pylist() == [json.dumps([[i % 5]], separators=(",", ":")) for i in range(n)]
    assert set(slices.column("cat").to_pylist()) == {"cpu_op"} and set(slices.column("lane").to_pylist()) == {
        "framework"}
    meta = file.metadata
    name = SLICES.names.index("name")
    for g in range(meta.num_row_groups):
        chunk = meta.row_group(g).column(name)
        # a dictionary page holds the group's names: all 20,000 of them in each would be 880 KB of it
        assert chunk.dictionary_page_offset is not None
        assert chunk.total_uncompressed_size < 600_000
