"""Device profiles side by side (two to eight, from any runs): every Summary metric of each with its delta from
the first, and the engine and DMA activity, so a kernel developer who dropped three summary-text files sees which
engine got busier and what the HBM traffic did. Computed once for the page and its JSON twin; no formatting.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from explorer.analysis.device.rows import ENGINES
from explorer.errors import BadRequest
from explorer.model.device_shapes import DeviceSideBySide, DeviceView, ProfileRef, SideMetric

MAX_SIDE_PROFILES = 8
Value = int | float | str | bool | None


def check_side_refs(refs: list[str]) -> None:
    """Two to MAX_SIDE_PROFILES profiles, or a 400."""
    if not 2 <= len(refs) <= MAX_SIDE_PROFILES:
        raise BadRequest(f"name 2 to {MAX_SIDE_PROFILES} device profiles as p=run:profile (got {len(refs)})")


def _number(value: Value) -> int | float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _side(name: str, values: list[Value]) -> SideMetric:
    first = _number(values[0])
    deltas: list[int | float | None] = []
    for v in values:
        n = _number(v)
        deltas.append(None if n is None or first is None else n - first)
    return {"name": name, "values": values, "deltas": deltas}


def compute_side_by_side(views: list[DeviceView], refs: list[ProfileRef]) -> DeviceSideBySide:
    """Engines (active % per engine, then DMA) and every Summary metric or stored field that any profile
    has, in the first profile's order then the others'; a profile lacking one shows None."""
    fields: list[dict[str, Value]] = []
    for v in views:
        known: dict[str, Value] = dict(v["summary"]["metrics"])
        known.update({f["name"]: f["value"] for f in v["summary_fields"] if f["name"] not in known})
        fields.append(known)
    names: list[str] = []
    for known in fields:
        names += [k for k in known if k not in names]
    engine_keys = [f"{e}_engine_active_time_percent" for e in ENGINES] + ["dma_active_time_percent"]
    return {
        "profiles": refs,
        "summary_only": [v["profile"]["tables"] == ["Summary"] for v in views],
        "engines": [_side(k, [f.get(k) for f in fields]) for k in engine_keys],
        "metrics": [_side(k, [f.get(k) for f in fields]) for k in names],
    }


@dataclass
class DeviceSidePage:
    """`/device/side-by-side?p=run:profile&p=...`; twin `/api/device/side-by-side` with the same query."""

    compare: DeviceSideBySide
    twin: str = ""


def side_query(refs: list[str], runs: str | None = None) -> str:
    """The page's query as given (`p=` repeated, then `runs=`), for its twin."""
    return urlencode([("p", r) for r in refs] + ([("runs", runs)] if runs is not None else []), safe=":,")


def build_side_page(compare: DeviceSideBySide, refs: list[str], runs: str | None = None) -> DeviceSidePage:
    return DeviceSidePage(compare, "/api/device/side-by-side?" + side_query(refs, runs))
