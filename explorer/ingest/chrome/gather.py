"""Text columns put in another order (the slices' names, shapes and args in the table's final order): the
compiled gather (`_gather.c`, explorer.native.loader), about ten times Arrow's take on these columns. The same
values either way: a column with nulls or of another type, or an install without the library, takes Arrow's."""

from __future__ import annotations

import ctypes

import numpy as np
import pyarrow as pa

from explorer.native import loader as native

LIBRARY = native.beside(__file__, "_gather")
ABI = 1  # GATHER_ABI in the C file
MAX_BYTES = 2**31 - 1  # a string array's values (int32 offsets): a bigger gather is cut into several arrays

_P = ctypes.c_void_p


def _load() -> ctypes.CDLL | None:
    lib = native.load(LIBRARY, "gather_abi", ABI)
    if lib is None:
        return None
    lib.gather_bytes.restype = ctypes.c_int64
    lib.gather_bytes.argtypes = (ctypes.c_int64, _P, _P, _P)
    lib.gather_text.restype = None
    lib.gather_text.argtypes = (ctypes.c_int64, _P, _P, _P, _P, _P, _P)
    return lib


_LIB = _load()
_NO_BYTES = np.zeros(1, np.uint8)  # where an array without a data buffer (all values empty) points


def take_text(values: pa.Array | pa.ChunkedArray, index: np.ndarray) -> pa.ChunkedArray:
    """values[index] (positions in the whole column), as Arrow's take gives them."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    if _LIB is None or not all(c.type == pa.string() and c.null_count == 0 for c in chunks):
        taken = values.take(pa.array(index, pa.int64()))
        return taken if isinstance(taken, pa.ChunkedArray) else pa.chunked_array([taken])
    index = np.ascontiguousarray(index, dtype=np.int64)
    starts = np.cumsum([0] + [len(c) for c in chunks], dtype=np.int64)
    if len(index) and (int(index.min()) < 0 or int(index.max()) >= starts[-1]):
        raise IndexError(f"take_text: an index outside 0..{starts[-1] - 1}")
    if len(chunks) == 1:
        chunk = np.zeros(len(index), np.int32)
        local = index
    else:
        chunk = (np.searchsorted(starts, index, side="right") - 1).astype(np.int32)
        local = index - starts[chunk]
    offsets = (_P * max(1, len(chunks)))(*[c.buffers()[1].address + 4 * c.offset for c in chunks])
    data = (_P * max(1, len(chunks)))(*[_data_address(c) for c in chunks])
    pieces = _gathered(chunk, local, offsets, data)
    del chunks  # (the arrays' buffers are read above: kept alive by `values` until here)
    return pa.chunked_array(pieces, pa.string())


def take_text_array(values: pa.Array | pa.ChunkedArray, index: np.ndarray) -> pa.Array:
    """take_text as one array (a batch's or a row group's gather, far under the 2 GiB that would cut it)."""
    column = take_text(values, index)
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def take_rows(batch: pa.RecordBatch, names: list[str], index: np.ndarray) -> pa.RecordBatch:
    """The columns `names` of `batch` at the rows `index` (a copy: nothing of the batch is kept): its text
    columns gathered, the others taken by Arrow."""
    taken = pa.array(index, pa.int64())
    return pa.record_batch([take_text_array(column, index) if column.type == pa.string() else column.take(taken)
                            for column in (batch.column(name) for name in names)], names=names)


def _data_address(chunk: pa.Array) -> int:
    buffer = chunk.buffers()[2]
    return int(_NO_BYTES.ctypes.data) if buffer is None or buffer.size == 0 else int(buffer.address)


def _gathered(chunk: np.ndarray, local: np.ndarray, offsets: ctypes.Array[_P],
              data: ctypes.Array[_P]) -> list[pa.Array]:
    assert _LIB is not None
    n = len(chunk)
    size = _LIB.gather_bytes(n, chunk.ctypes.data, local.ctypes.data, offsets)
    if size > MAX_BYTES and n > 1:
        half = n // 2
        return (_gathered(chunk[:half], local[:half], offsets, data)
                + _gathered(chunk[half:], local[half:], offsets, data))
    out_offsets = np.empty(n + 1, np.int32)
    out_data = np.empty(max(1, size), np.uint8)
    _LIB.gather_text(n, chunk.ctypes.data, local.ctypes.data, offsets, data, out_offsets.ctypes.data,
                     out_data.ctypes.data)
    return [pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(out_offsets),
                                                   pa.py_buffer(out_data[:size])])]
