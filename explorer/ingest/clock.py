"""Clock alignment across hosts: when a run's ranks sit on two or more known hosts, each host is aligned on
the first collective its ranks share with the reference host, if the clocks differ by more than the traces'
own skew, with a warning. The rule: docs/architecture.md, "ingest/clock.py"."""

from __future__ import annotations

import re
import statistics

import numpy as np

from explorer.ingest.builder import TraceBuilder
from explorer.model.ranks import NO_RANK

# the communication names of explorer.analysis.kernels.CATEGORY_RULES (ingest cannot import analysis)
COLLECTIVE_NAME = re.compile(r"nccl|rccl|(?:^|[^a-z])(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|"
                             r"all_?to_?all)(?:[^a-z]|$)", re.IGNORECASE)
MIN_SKEW_NS = 1_000_000


def align_hosts(builder: TraceBuilder) -> None:
    """Shift every host's sources onto the reference host's clock where the rule says so (module docstring)."""
    book = builder.threads
    hosts: dict[str, list[int]] = {}
    for src, host in book.hosts.items():
        if host and book.ranks.get(src, NO_RANK) != NO_RANK:
            hosts.setdefault(host, []).append(src)
    if len(hosts) < 2:
        return
    raw = builder.raw_slices()
    src_of = raw.thread_src[raw.thread] if len(raw.thread) else np.zeros(0, np.int64)
    order = np.argsort(raw.ts_ns, kind="stable")
    reference = min(hosts, key=lambda h: min(book.ranks[s] for s in hosts[h]))
    first_src = min(hosts[reference], key=lambda s: book.ranks[s])
    name = next((raw.name[i] for i in order.tolist() if src_of[i] == first_src and COLLECTIVE_NAME.search(raw.name[i] or "")),
                None)
    if name is None:
        return
    ends: dict[int, int] = {}
    for i in order.tolist():
        src = int(src_of[i])
        if src not in ends and raw.name[i] == name:
            ends[src] = int(raw.ts_ns[i] + raw.dur_ns[i])
    per_host = {h: [ends[s] for s in srcs if s in ends] for h, srcs in hosts.items()}
    if not per_host[reference]:
        return
    skew = max([MIN_SKEW_NS] + [max(v) - min(v) for v in per_host.values() if v])
    ref_end = int(statistics.median_low(per_host[reference]))
    for host, host_ends in per_host.items():
        if host == reference or not host_ends:
            continue
        offset = ref_end - int(statistics.median_low(host_ends))
        if abs(offset) > skew:
            builder.shift_sources(set(hosts[host]), offset)
            builder.warn("clock_aligned", f"host {host}: its clock differs from host {reference}'s by {offset:+,} ns, "
                         f"more than the traces' own skew ({skew:,} ns); its events were shifted by {offset:+,} ns "
                         f"to align the first {name!r} across hosts", 1, host)
