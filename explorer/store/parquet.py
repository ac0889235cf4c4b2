"""How the store writes Parquet: zstd level 1, row groups of ROW_GROUP_ROWS (a window of one track reads few of
them; slice_rows reads one), and a dictionary only for the columns whose values repeat."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

import pyarrow as pa

T = TypeVar("T")

ROW_GROUP_ROWS = 65536
PARQUET_OPTIONS: dict[str, Any] = {"row_group_size": ROW_GROUP_ROWS, "compression": "zstd", "compression_level": 1}
# Columns whose values repeat (every text column but the args, track ids and depths) are dictionary-encoded;
# the rest (ids, times, args) plain. Parquet's default tries a dictionary on every column and gives up per row
# group on the unique ones: measured on the 1M-event synthetic trace's 667k slices, the write took 0.75-0.83 s
# and 11.9 MB that way, 0.48-0.49 s and 5.8 MB this way; real traces' slices alike (bench/parquet_write.py).
UNIQUE_TEXT = frozenset({"args"})
REPEATING_INTS = frozenset({"track_id", "depth"})


# A text column that comes as a dictionary (the ingest's slices: names, categories, lanes, shapes) is written as
# it is, codes and values, when its dictionary is this small: no decoding to one string per row and hashing them
# again (`df_index_resolver`'s slices: 101 -> 67 ms). A bigger one is decoded first: Parquet writes a column
# chunk's dictionary whole, every value in every row group.
DIRECT_DICTIONARY_BYTES = 256 * 1024


def write_schema(table: pa.Table, stored: pa.Schema) -> pa.Schema:
    """The schema to write `table` in, a file to read back as `stored`: `stored`'s types, but a text column
    that `table` holds as a small dictionary stays one. Write with `store_schema=False`: the file then names
    no Arrow types of its own, and its text columns read back as text."""
    fields = []
    for f in stored:
        held = table.schema.field(f.name).type if f.name in table.schema.names else f.type
        small = pa.types.is_dictionary(held) and pa.types.is_string(held.value_type) and max(
            (c.dictionary.nbytes for c in table.column(f.name).chunks), default=0) <= DIRECT_DICTIONARY_BYTES
        fields.append(pa.field(f.name, held) if small and pa.types.is_string(f.type) else f)
    return pa.schema(fields)


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """PARQUET_OPTIONS with the columns of `schema` to dictionary-encode."""
    dictionary = [f.name for f in schema if f.name in REPEATING_INTS or (
        pa.types.is_string(f.type) or pa.types.is_large_string(f.type)) and f.name not in UNIQUE_TEXT]
    return {**PARQUET_OPTIONS, "use_dictionary": dictionary}


_END = object()


def ahead(items: Iterator[T]) -> Generator[T, None, None]:
    """`items`, each made in a thread of its own while the caller works on the one before: a writer's next
    row group (the args' takes, the cast) made while Parquet encodes the last, both outside the GIL. At most
    one item waits; an error raised making one is raised here, in its place."""
    with ThreadPoolExecutor(1, thread_name_prefix="parquet-ahead") as pool:
        pending = pool.submit(next, items, _END)
        while (item := pending.result()) is not _END:
            pending = pool.submit(next, items, _END)
            yield cast(T, item)
