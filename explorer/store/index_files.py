"""A run's timeline index as files in its folder (`index/`), mapped by a server instead of built or copied
into its memory; written by the first build of a big run's index or by the ingest. Anything but a whole
index of this version reads as none, and the caller builds it. The format: docs/formats.md, "The timeline
index files"."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from explorer.analysis.timeline.index import IndexSink, TimelineIndex, build_index_into
from explorer.analysis.timeline.layout import TrackOrder
from explorer.analysis.timeline.levels import Items, Level
from explorer.model.tables import TABLE_SCHEMAS, IngestedTrace
from explorer.native.heap import trim_heap

INDEX_DIR = "index"
INDEX_VERSION = 2  # 2: the Python-stack fold keys (explorer.analysis.timeline.fold)
META = "index.json"
# the ingest builds a level this many positions at a time (the server's build in memory: LEVEL_PIECE), on two
# threads (it runs once the slices' Parquet is written: the write's threads are done by then)
FILE_PIECE = 1 << 19
FILE_THREADS = 2
# a server writes the index of a run stored without one at its first build from this many slices on (~20 MB of
# files; explorer.runs.run.timeline_index): under it the build takes a tenth of a second, and mapping saves little
FILES_FROM_SLICES = 200_000
# the per-track dictionaries (int keys in JSON are strings) and how a value reads back
_DICTS = {"track_kind": str, "track_lane": str, "counter_ranges": tuple, "instant_ranges": tuple}
_LISTS = ("names", "instant_names", "flow_kind")


class FileSink(IndexSink):
    """Writes each part to `folder` as it comes and keeps none of it."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()  # (its parent, the run's folder, is there: a run deleted meanwhile is not made again)
        self.folder = folder
        self.meta: dict[str, Any] = {"version": INDEX_VERSION, "levels": []}

    def put(self, name: str, value: Any) -> None:
        if isinstance(value, np.ndarray):
            self._array(name, value)
        elif isinstance(value, TrackOrder):
            for f in fields(TrackOrder):
                part = getattr(value, f.name)
                if isinstance(part, np.ndarray):
                    self._array(f"order.{f.name}", part)
                else:
                    self.meta[f"order.{f.name}"] = part
        elif name in _DICTS:
            self.meta[name] = [[k, v] for k, v in value.items()]
        else:
            self.meta[name] = value

    def level(self, level: Level) -> None:
        at = len(self.meta["levels"])
        for f in fields(Level):
            if f.name == "bins":
                for g in fields(Items):
                    self._array(f"level{at}.bins.{g.name}", getattr(level.bins, g.name))
            elif f.name != "bin_ns":
                self._array(f"level{at}.{f.name}", getattr(level, f.name))
        self.meta["levels"].append(level.bin_ns)
        trim_heap()  # (what the level's build dropped: a piece's blocks are the heap's, not mappings)

    def close(self) -> None:
        """The index is complete: its metadata written last, so a folder without it is no index."""
        (self.folder / META).write_text(json.dumps(self.meta, separators=(",", ":")))

    def _array(self, name: str, value: np.ndarray) -> None:
        np.save(self.folder / f"{name}.npy", np.ascontiguousarray(value), allow_pickle=False)


def save_timeline_index(folder: Path, slices: pa.Table, tracks: pa.Table, counters: pa.Table, flows: pa.Table,
                        origin_ns: int, instants: pa.Table | None = None) -> None:
    """Build a run's timeline index into `folder` (which must not exist), holding one part at a time."""
    sink = FileSink(folder)
    build_index_into(sink, slices, tracks, counters, flows, origin_ns, instants, piece=FILE_PIECE,
                     threads=FILE_THREADS)
    sink.close()


def write_run_index(work: Path, trace: IngestedTrace) -> None:
    """An ingested trace's index into its run's folder `work` (RunStore.save's `beside`)."""
    tables = trace.tables

    def table(name: str) -> pa.Table:
        return tables[name] if name in tables else TABLE_SCHEMAS[name].empty_table()

    start = trace.meta.get("start_ns", 0)
    save_timeline_index(work / INDEX_DIR, table("slices"), table("tracks"), table("counters"), table("flows"),
                        start if isinstance(start, int) else int(str(start)), table("instants"))


def load_timeline_index(folder: Path, origin_ns: int) -> TimelineIndex | None:
    """The index stored in `folder`, its arrays mapped read-only; None when there is none of this version and
    origin (the caller builds it)."""
    try:
        meta = json.loads((folder / META).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("version") != INDEX_VERSION or meta.get("origin_ns") != origin_ns:
        return None

    def array(name: str) -> np.ndarray:
        path = folder / f"{name}.npy"
        try:
            loaded: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError:  # an empty array cannot be mapped
            loaded = np.load(path, allow_pickle=False)
        return loaded

    try:
        return _read(folder, meta, array, origin_ns)
    except (OSError, ValueError, KeyError, TypeError):  # a part missing or damaged: no index (the caller builds it)
        return None


def _read(folder: Path, meta: dict[str, Any], array: Any, origin_ns: int) -> TimelineIndex:
    plain = {f.name for f in fields(TimelineIndex)} - {"levels", "order", "origin_ns", *_DICTS, *_LISTS}
    parts: dict[str, Any] = {name: array(name) for name in plain}
    for name, kind in _DICTS.items():
        parts[name] = {int(k): tuple(v) if kind is tuple else v for k, v in meta[name]}
    for name in _LISTS:
        parts[name] = list(meta[name])
    order: dict[str, Any] = {f.name: meta[f"order.{f.name}"] if f"order.{f.name}" in meta
                             else array(f"order.{f.name}") for f in fields(TrackOrder)}
    levels = [Level(bin_ns=int(bin_ns), bins=Items(*(array(f"level{i}.bins.{g.name}") for g in fields(Items))),
                    **{f.name: array(f"level{i}.{f.name}") for f in fields(Level) if f.name not in ("bin_ns", "bins")})
              for i, bin_ns in enumerate(meta["levels"])]
    return TimelineIndex(origin_ns=origin_ns, levels=levels, order=TrackOrder(**order), **parts)
