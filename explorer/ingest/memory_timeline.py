"""`torch.profiler.profile.export_memory_timeline` output read into the memory_categories table: the raw form
(`.raw.json`: a list of [time ns, action, signed bytes, category index]) or the coalesced form ([times µs,
sizes by category per time]). Category indices are torch/profiler/_memory_profiler.py's _CATEGORY_TO_INDEX."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.model.tables import MEMORY_CATEGORIES

# _CATEGORY_TO_INDEX's order (the keys of _CATEGORY_TO_COLORS); the last is a tensor no category was found for
CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail",
              "unknown")
RAW_FIELDS = 4


def parse_memory_timeline(data: bytes, name: str, builder: TraceBuilder, instance: str = "") -> dict[str, Any]:
    """The file's byte changes into the run's memory_categories table."""
    try:
        value = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        raise BadTrace(name, "not a readable export_memory_timeline file (invalid JSON)") from None
    table = _coalesced(value, name) if _is_coalesced(value) else _raw(value, name)
    builder.add_table("memory_categories", table)
    return {"changes": table.num_rows}


def _category(index: object) -> str:
    return CATEGORIES[index] if isinstance(index, int) and 0 <= index < len(CATEGORIES) else "unknown"


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63


def _raw(value: object, name: str) -> pa.Table:
    if not isinstance(value, list):
        raise BadTrace(name, "not an export_memory_timeline file: not a JSON list")
    rows = [e for e in value if isinstance(e, list) and len(e) == RAW_FIELDS and all(_is_int(x) for x in e[:3])]
    if len(rows) != len(value):
        raise BadTrace(name, f"not export_memory_timeline raw output: {len(value) - len(rows)} entries are not "
                             "[time ns, action, bytes, category]")
    return pa.table({"ts_ns": [r[0] for r in rows], "action": [r[1] for r in rows], "bytes": [r[2] for r in rows],
                     "category": [_category(r[3]) for r in rows]}, schema=MEMORY_CATEGORIES)


def _is_coalesced(value: object) -> bool:
    return (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list) and isinstance(value[1], list)
            and len(value[0]) == len(value[1]) and all(isinstance(r, list) for r in value[1]))


def _coalesced(value: list[Any], name: str) -> pa.Table:
    """[times µs, sizes per time] (sizes[i][c + 1]: category c's bytes after time i) as the changes between times."""
    times, sizes = value
    if not all(_is_int(t) for t in times) or not all(len(r) == len(CATEGORIES) + 1 and all(_is_int(x) for x in r)
                                                    for r in sizes):
        raise BadTrace(name, "not export_memory_timeline output: times and sizes by category expected")
    cols: dict[str, list[Any]] = {"ts_ns": [], "action": [], "bytes": [], "category": []}
    before = [0] * len(CATEGORIES)
    for t, row in zip(times, sizes, strict=True):
        for c, now in enumerate(row[1:]):
            if now != before[c]:
                for key, v in zip(cols, (t * 1000 if t >= 0 else -1, 0, now - before[c], CATEGORIES[c]), strict=True):
                    cols[key].append(v)
                before[c] = now
    return pa.table(cols, schema=MEMORY_CATEGORIES)
