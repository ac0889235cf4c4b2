"""Rank identity at ingest: which rank and host each source of a run is, from what the trace says, its file
name, its Neuron capture folder or its `worker_gid`, by a table of rules (RANK_NAME_RULES), most specific
first. Clock alignment is explorer.ingest.clock; reading the rank back from a stored run is
explorer.model.ranks."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from explorer.ingest.builder import TraceBuilder
from explorer.ingest.capture import ProcessFolder
from explorer.ingest.neuron.rules import state_of
from explorer.model.ranks import NO_RANK

# file-name rules for a rank, tried in order on the file name, then on each folder above it (innermost first)
RANK_NAME_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("neuron framework trace", re.compile(r"^neuron_framework_trace_rank_(\d+)\.json", re.IGNORECASE)),
    ("rank-N / rank_N / _rank_N / rankN", re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)),
    ("workerN / worker-N / worker_N", re.compile(r"(?:^|[^a-z])worker[-_]?(\d+)(?![0-9])", re.IGNORECASE)),
)
# torch.profiler.tensorboard_trace_handler names files `<worker_name>.<ms>.pt.trace.json`, the worker name
# defaulting to `<hostname>_<pid>`
_TENSORBOARD_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json")


def rank_of_name(name: str) -> int:
    """The rank a file's name (or a folder above it) states, NO_RANK when none does."""
    parts = PurePosixPath(name).parts
    for part in reversed(parts):
        for _rule, pattern in RANK_NAME_RULES:
            match = pattern.search(part)
            if match:
                return int(match.group(1))
    return NO_RANK


def host_of_name(name: str) -> str:
    """The host of a tensorboard_trace_handler file name (`<host>_<pid>.<ms>.pt.trace.json`), else ""."""
    match = _TENSORBOARD_NAME.match(PurePosixPath(name).name)
    if not match or rank_of_name(match.group("host")) != NO_RANK:
        return ""  # `rank-3_1234.…`: the worker name is a rank, not a host
    return match.group("host")


def rank_of_meta(meta: dict[str, Any]) -> int:
    """`distributedInfo.rank` of a Kineto trace, NO_RANK when absent or not an integer."""
    dist = meta.get("distributed_info")
    rank = dist.get("rank") if isinstance(dist, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else NO_RANK


def identify_ranks(builder: TraceBuilder, metas: dict[int, dict[str, Any]], folders: list[ProcessFolder]) -> None:
    """Set each source's rank and host (builder.threads.ranks / hosts). A capture folder's sources share
    the rank of its framework trace (distributedInfo, else the rank file's name) and its instance as host;
    a loose file takes distributedInfo.rank, else the rank its name states, and the trace's `host_name`, else the
    host its name states."""
    book = builder.threads
    in_folder: set[int] = set()
    for folder in folders:
        srcs = folder.framework_srcs + folder.system_srcs
        in_folder.update(srcs)
        ranks = [r for s in folder.framework_srcs if (r := _source_rank(builder, metas, s)) != NO_RANK]
        rank = min(ranks) if ranks else _worker_gid(builder, srcs)
        for src in srcs:
            book.ranks[src] = rank
            book.hosts[src] = folder.instance
    for src, name in enumerate(builder.sources):
        if src in in_folder:
            continue
        book.ranks[src] = _source_rank(builder, metas, src)
        host = metas.get(src, {}).get("host_name")
        book.hosts[src] = host if isinstance(host, str) and host else host_of_name(name)
    known = {r for r in book.ranks.values() if r != NO_RANK}
    book.label_ranks = len(known) > 1
    if known:
        builder.meta["ranks"] = sorted(known)


def _source_rank(builder: TraceBuilder, metas: dict[int, dict[str, Any]], src: int) -> int:
    rank = rank_of_meta(metas.get(src, {}))
    rank = rank if rank != NO_RANK else rank_of_name(builder.sources[src])
    return rank if rank != NO_RANK else _worker_gid(builder, [src])


def _worker_gid(builder: TraceBuilder, srcs: list[int]) -> int:
    """The one Neuron `worker_gid` the system events of these sources name (the worker's global id,
    its rank in a multi-worker job); NO_RANK when they name none, or several (a capture of several workers)."""
    gids = set().union(*(state_of(builder).worker_gids.get(s, set()) for s in srcs))
    return gids.pop() if len(gids) == 1 else NO_RANK
