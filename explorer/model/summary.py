"""A run's summary as one typed model: what the catalog stores (as JSON) and every front end reads.

Pydantic, not msgspec: the summary is read back from JSON written by every earlier version (fields
missing, extra ones), which pydantic validates with defaults, and FastAPI documents pydantic types in
/openapi.json natively. Counts and times only (times in ns); nothing here computes or formats.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema


class DeviceSummary(BaseModel):
    """All device execution time of a run, and how much of it a framework op launched."""

    model_config = ConfigDict(extra="allow")

    device_total_ns: int = Field(0, description="Device execution time (0 for a host-only profile)")
    attributed_ns: int = Field(0, description="Part of it attributed to a framework op")
    unattributed_ns: int = Field(0, description="Part of it no framework op launched")


class DeviceModel(BaseModel):
    """One device model of a run and how many of it: a GPU model from Kineto's `deviceProperties[].name`
    (count: distinct devices listed, by host and id: the visible devices, not only those that ran work),
    or a Neuron instance type from a device profile's `Metadata.instance_type` (count: instances)."""

    model_config = ConfigDict(extra="allow")

    name: str
    count: int = 1
    source: str = Field("", description="deviceProperties | neuron Metadata | neuron-ls | neuron summary-text")


class StoredArtifact(BaseModel):
    """One uploaded file, as kept in the run's folder."""

    model_config = ConfigDict(extra="allow")

    name: str
    stored_as: str = ""
    size: int = 0
    sha256: str = ""


class IngestWarning(BaseModel):
    """One kind of oddity met during ingest, with how many times it occurred."""

    model_config = ConfigDict(extra="allow")

    code: str = ""
    message: str = ""
    count: int = 1
    source: str = ""


class RunSummary(BaseModel):
    """Counts, span and device time of a ready run; a run still ingesting has an empty one (all defaults,
    none set: `model_dump(exclude_unset=True)` gives back exactly what was stored)."""

    model_config = ConfigDict(extra="allow")

    start_ns: int = Field(0, description="Absolute start of the profiled span, its first real event (not a "
                          "profiler marker); the run's time origin")
    end_ns: int = Field(0, description="Absolute end of the profiled span: the last real event's end")
    span_ns: int = Field(0, description="end_ns - start_ns")
    # a summary stored before these fields existed reads 0 for both: its span was the whole data's then
    extent_start_ns: int = Field(0, description="Absolute start of all data, profiler markers included "
                                 "(explorer.model.markers); <= start_ns. 0: as start_ns")
    extent_end_ns: int = Field(0, description="Absolute end of all data, profiler markers included; >= end_ns. "
                               "0: as end_ns")
    slices: int = 0
    slices_per_lane: dict[str, int] = Field(default_factory=dict)
    tracks: int = 0
    flows: int = 0
    counters: int = 0
    instants: int = 0
    warnings: list[IngestWarning] = Field(default_factory=list)
    warning_count: int = 0
    artifacts: list[StoredArtifact] = Field(default_factory=list)
    device: DeviceSummary = Field(default_factory=DeviceSummary)
    files: list[dict[str, Any]] = Field(default_factory=list, description="Per input file: name, format, ...")
    devices: list[DeviceModel] = Field(default_factory=list,
                                       description="Device models (empty: none recorded, or a run stored before)")
    neuron_files: list[dict[str, Any]] = Field(default_factory=list, description="Neuron NEFF / NTFF / .pb files "
                                               "kept as artifacts: kind, what, size, version, convert commands")

    @property
    def extent_rel(self) -> tuple[int, int]:
        """All the data's [start, end) relative to the origin (markers included); (0, span) when unknown."""
        lo = self.extent_start_ns - self.start_ns if self.extent_start_ns else 0
        hi = self.extent_end_ns - self.start_ns if self.extent_end_ns else self.span_ns
        return min(lo, 0), max(hi, self.span_ns)

    @property
    def device_total_ns(self) -> int:
        return self.device.device_total_ns

    def stored(self) -> dict[str, Any]:
        """The JSON object the catalog keeps and the API returns (only the fields that were set)."""
        return self.model_dump(mode="json", exclude_unset=True)


def load_summary(data: dict[str, Any] | str) -> RunSummary:
    """A stored summary (a dict, or its JSON text), from any version of the store."""
    if isinstance(data, str):
        return RunSummary.model_validate_json(data or "{}")
    return RunSummary.model_validate(data)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` references replaced by their definitions (it is embedded in OpenAPI)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, list) else node

    result: dict[str, Any] = walk(schema)
    return result


# a summary as the API returns it: RunSummary.stored(), a plain dict documented with RunSummary's schema
SummaryJson = Annotated[dict[str, Any], WithJsonSchema(_inline_refs(RunSummary.model_json_schema()))]
