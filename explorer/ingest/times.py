"""The one way a time in a trace file becomes integer nanoseconds: exact decimal arithmetic, rounded
half away from zero (as DuckDB's text -> DECIMAL cast rounds), range-checked to 0 <= ns < MAX_TS_NS.
Scalars (int, Decimal, numeric text) and DuckDB's DECIMAL(38,3) Arrow columns; never a binary float.
"""

from __future__ import annotations

import sys
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_TS_NS = 2**62  # beyond this a timestamp cannot be a real clock (and would overflow sums)
US_DECIMAL = pa.decimal128(38, 3)  # µs with 3 decimals: the unscaled integer is the ns count

# wide enough for any in-range value with its rounding digits; a wider coefficient is out of range anyway
_CTX = Context(prec=40, rounding=ROUND_HALF_UP, Emax=10**6, Emin=-10**6, traps=[InvalidOperation])
_STEP = {0: Decimal(1), 3: Decimal("0.001")}  # quantize to this, then shift: one exact rounding step
_FACTOR = {0: 1, 3: 1000}
_MAX_DIGITS = 30  # a value >= 10**30 (µs or ns) is out of range whatever its unit

Number = int | Decimal | str


def _in_range(ns: int) -> int | None:
    return ns if 0 <= ns < MAX_TS_NS else None


def _scaled(value: Number, exponent: int) -> int | None:
    """value * 10**exponent as an exact integer, rounded half away from zero; None if not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * _FACTOR[exponent]
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or "_" in text:
            return None  # Decimal() would take "1_000" and non-ASCII digits; no trace writer does
        try:
            value = Decimal(text)
        except InvalidOperation:
            return None
    if not isinstance(value, Decimal):
        return None
    return _scaled_decimal(value, exponent)


def _scaled_decimal(value: Decimal, exponent: int) -> int | None:
    if not value.is_finite() or value.adjusted() > _MAX_DIGITS:
        return None  # also keeps 1E+999999999 from becoming a huge Python int below
    num, den = value.as_integer_ratio()
    factor = _FACTOR[exponent]
    if factor % den == 0:  # exact at ns resolution: the common case, in integer arithmetic
        return num * (factor // den)
    try:
        # rounding half up depends only on the first dropped digit, so one quantize is exact
        return int(value.quantize(_STEP[exponent], ROUND_HALF_UP, _CTX).scaleb(exponent, _CTX))
    except InvalidOperation:
        return None  # more digits than any real clock has: out of range


def us_to_ns(value: Number | None, base_ns: int = 0) -> int | None:
    """A µs value (Chrome `ts`/`dur`) plus an integer ns base -> ns; None when missing or out of range."""
    if type(value) is int:  # integers need no conversion: first, as this runs once per event
        ns: int | None = value * 1000
    elif value is None:
        return None
    else:
        ns = _scaled_decimal(value, 3) if type(value) is Decimal else _scaled(value, 3)
    return None if ns is None else _in_range(ns + base_ns)


def to_ns(value: object) -> int | None:
    """A ns value (int, Decimal or numeric text) -> integer ns; None when unusable or out of range.
    Binary floats are refused: they reach here only if a decoder was set up wrongly."""
    if not isinstance(value, int | Decimal | str) or isinstance(value, bool):
        return None
    ns = _scaled(value, 0)
    return None if ns is None else _in_range(ns)


def decimal_column_ns(column: pa.Array, base_ns: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A DECIMAL(38,3) µs column -> (int64 ns + base_ns, valid mask); nulls and out-of-range are invalid.

    The unscaled int128 of each value is its ns count: read as (low, high) int64 words, it fits when
    the high word is the low word's sign extension."""
    if column.type != US_DECIMAL:
        raise TypeError(f"expected {US_DECIMAL}, got {column.type}")
    if sys.byteorder != "little":
        raise NotImplementedError("decimal128 words are read in little-endian order")
    n = len(column)
    data = column.buffers()[1]
    if n == 0 or data is None:
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    words = np.frombuffer(data, dtype=np.int64)[2 * column.offset:2 * (column.offset + n)].reshape(n, 2)
    low, high = words[:, 0], words[:, 1]
    ok = (high == (low >> 63)) & (low >= -MAX_TS_NS) & (low < MAX_TS_NS)
    if column.null_count:
        ok &= column.is_valid().to_numpy(zero_copy_only=False)
    if -MAX_TS_NS < base_ns < MAX_TS_NS:
        ns = np.where(ok, low, 0) + base_ns  # both below 2**62 in size: no int64 overflow
    else:  # an absurd base: exact Python ints, then only in-range values come back to int64
        wide = np.where(ok, low, 0).astype(object) + base_ns
        ok &= (wide >= 0) & (wide < MAX_TS_NS)
        ns = np.where(ok, wide, 0).astype(np.int64)
    ok &= (ns >= 0) & (ns < MAX_TS_NS)
    return np.where(ok, ns, 0), ok


def arrow_ns_column(column: pa.Array) -> pa.Array:
    """An Arrow column of ns values -> int64 ns, null where unusable or out of range. Integer and timestamp
    columns stay vectorised; decimal and text columns go value by value through to_ns. A floating column
    is refused here (TypeError): its caller decides how to read it and warns."""
    if pa.types.is_floating(column.type):
        raise TypeError("a floating-point time column has no exact ns values")
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ns")).cast(pa.int64())
    if pa.types.is_integer(column.type) and not pa.types.is_uint64(column.type):
        ints = column.cast(pa.int64())
        ok = pc.and_(pc.greater_equal(ints, 0), pc.less(ints, MAX_TS_NS))
        return pc.if_else(ok, ints, pa.scalar(None, pa.int64()))
    return pa.array([None if v is None else to_ns(v) for v in column.to_pylist()], pa.int64())
