"""Per-rank summary of a multi-rank run (where each rank's step time went, as interval unions in integer ns),
stragglers with their evidence, and one rank against another. The straggler rule's constants are below; the
rule itself: docs/architecture.md, "analysis/ranks.py"."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.compare import RunOps, compute_compare, kernel_table
from explorer.analysis.intervals import covered_between, union_segments
from explorer.analysis.kernels import categorize
from explorer.analysis.op_stats import compute_op_stats
from explorer.analysis.rank_slices import check_ranks, restrict_to_ranks
from explorer.analysis.steps import DEFAULT_STEP_ANNOTATION, part_of
from explorer.errors import BadRequest
from explorer.model.lanes import Lane
from explorer.model.ranks import NO_RANK, track_ranks
from explorer.model.shapes import (
    CollectiveMismatch,
    CollectiveRow,
    CompareResult,
    RankEvidence,
    RankRow,
    RanksResult,
    RankStep,
    UnmatchedCollective,
)

I64 = np.int64
BARRIER = re.compile(r"barrier", re.IGNORECASE)  # gloo:barrier, c10d::barrier, nccl barriers: waiting, not work
STEP_OUTLIER_FRACTION = 0.05
STEP_IQR_FACTOR = 1.5
ARRIVAL_LATE_FRACTION = 0.05
RULE = {"step_outlier_fraction": STEP_OUTLIER_FRACTION, "step_iqr_factor": STEP_IQR_FACTOR,
        "arrival_late_fraction": ARRIVAL_LATE_FRACTION}
_PARTS = ("compute", "communication", "memcpy", "other")


@dataclass
class _Columns:
    """The slice columns every rank's numbers are read from, once for the run."""

    rank: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    part: np.ndarray  # index into _PARTS, -1: not an execution of the rank's mode
    device: np.ndarray
    is_step: np.ndarray
    names: np.ndarray


def compute_ranks(slices: pa.Table, tracks: pa.Table, origin_ns: int, collectives: list[CollectiveRow],
                  mismatches: list[CollectiveMismatch]) -> RanksResult:
    """The per-rank summary and stragglers of a run (empty without rank information). Times of steps are
    relative to `origin_ns`; `slices` needs the cached slice columns (and `shapes` for the evidence);
    `collectives` and `mismatches` are the collectives view's (explorer.analysis.collectives)."""
    of_track = _rank_of_track(tracks)
    cols = _columns(slices, of_track)
    ranks = sorted({int(r) for r in of_track.tolist() if r != NO_RANK})
    rows = [_rank_row(cols, r, origin_ns, _first(tracks, of_track, r)) for r in ranks]
    late_to = _arrivals(collectives, rows)
    matched_steps, skew = _step_starts(rows)
    median = _median_low([r["step_time_ns"] for r in rows])
    matched = sum(1 for c in collectives if len(c["ranks"]) > 1)
    _flag(rows, median, late_to, by_arrival=matched > 0)
    reference = reference_rank(rows, median)
    for row in rows:
        if row["straggler"] and row["evidence"] is not None and reference is not None:
            _add_evidence(row["evidence"], slices, tracks, reference, row["mode"] == "device")
    return {"ranks": rows, "median_step_time_ns": median, "stragglers": [r["rank"] for r in rows if r["straggler"]],
            "rule": RULE, "unmatched": [_unmatched(m) for m in mismatches] if len(rows) > 1 else [],
            "matched_collectives": matched, "latest_arriver": latest_arriver(rows) if matched else None,
            "matched_steps": matched_steps, "step_start_skew_ns": skew}


def reference_rank(rows: list[RankRow], median: int) -> int | None:
    """The rank others are held against: the non-straggler arriving nearest the median (to collectives,
    then to steps), then with the step time nearest the median (lowest rank of equals); all stragglers
    (or one rank): the same over every rank."""
    pool = [r for r in rows if not r["straggler"]] or rows
    if not pool:
        return None
    return min(pool, key=lambda r: (r["arrival_late_ns"], abs(r["step_start_late_ns"]),
                                    abs(r["step_time_ns"] - median), r["rank"]))["rank"]


def latest_arriver(rows: list[RankRow]) -> int | None:
    """The rank whose late arrivals made the others wait longest: the most wait caused over the matched collectives
    it was last to (then the most of them, the lowest rank). Weighed by the wait, not counted: a rank 100 ms late to
    every all-reduce is the straggler even where another is last, by microseconds, to more barriers."""
    if not rows:
        return None
    return max(rows, key=lambda r: (r["wait_caused_ns"], r["last_arrivals"], -r["rank"]))["rank"]


def slowest_rank(rows: list[RankRow]) -> int | None:
    """The rank "compare slowest" picks: a straggler before any other; among equals the latest arriver
    (the most wait caused, last to the most collectives, the latest to collectives, to steps), then the
    longest step time, the lowest rank."""
    if not rows:
        return None
    return max(rows, key=lambda r: (r["straggler"], r["wait_caused_ns"], r["last_arrivals"], r["arrival_late_ns"],
                                    r["step_start_late_ns"], r["step_time_ns"], -r["rank"]))["rank"]


def compute_rank_compare(slices: pa.Table, tracks: pa.Table, a: int, b: int,
                         flows: pa.Table | None = None) -> CompareResult:
    """Rank `a` against rank `b` (the baseline) op by op and kernel by kernel, as the run compare does (`flows`:
    which runtime call launched what, so a bare launch is a row as in the run's own op table)."""
    present = sorted({int(r) for r in track_ranks(tracks).tolist() if r != NO_RANK})
    check_ranks((a, b), present)
    if a == b:
        raise BadRequest(f"pick two different ranks to compare (both are {a})")
    return compute_compare([_rank_ops(slices, tracks, b, flows), _rank_ops(slices, tracks, a, flows)],
                           baseline=f"rank {b}")


def _rank_ops(slices: pa.Table, tracks: pa.Table, rank: int, flows: pa.Table | None) -> RunOps:
    part = restrict_to_ranks(slices, tracks, flows, (rank,))
    sub = part.slices
    dev = sub.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
    return RunOps(f"rank {rank}", f"rank {rank}", compute_op_stats(sub, part.flows if flows is not None else None)[0],
                  int(sub.column("dur_ns").to_numpy()[dev].sum()), kernels=kernel_table(sub))


def _add_evidence(evidence: RankEvidence, slices: pa.Table, tracks: pa.Table, reference: int, device: bool) -> None:
    """The op or kernel of the evidence's rank whose time most exceeds the same one on `reference`."""
    evidence["reference_rank"] = reference
    if evidence["rank"] == reference:
        return
    result = compute_rank_compare(slices, tracks, evidence["rank"], reference)
    field = "self_device_ns" if device else "self_cpu_ns"
    best: tuple[int, str, str] = (0, "", "")
    # kernels first: of an op and the kernel it launches, equally late, the kernel says more
    for kind, rows, key in (("kernel", result["kernels"]["rows"], "total_ns"), ("op", result["rows"], field)):
        names = [str(row["name"]) for row in rows]
        waits = categorize(pa.array(names, pa.string()), pa.array(["kernel"] * len(names), pa.string())).to_pylist()
        for row, category in zip(rows, waits, strict=True):
            if (category == "communication" or str(row["name"]).startswith(DEFAULT_STEP_ANNOTATION[:-1])
                    or BARRIER.search(str(row["name"]))):
                continue  # time in a collective (a barrier too) is the waiting lateness causes, a step's the sum
            excess = int(row["vs_baseline"][0][key])
            if excess > best[0]:
                best = (excess, kind, row["name"])
    evidence["excess_ns"], evidence["kind"], evidence["name"] = best


def _rank_of_track(tracks: pa.Table) -> np.ndarray:
    ids = tracks.column("track_id").to_numpy().astype(I64)
    out = np.full(int(ids.max(initial=-1)) + 1, NO_RANK, dtype=I64)
    out[ids] = track_ranks(tracks)
    return out


def _first(tracks: pa.Table, of_track: np.ndarray, rank: int) -> tuple[str, str]:
    """(host, process) of a rank: its first track's."""
    ids = tracks.column("track_id").to_numpy()
    i = int(np.flatnonzero(of_track[ids] == rank)[0])
    host = str(tracks.column("host")[i].as_py() or "") if "host" in tracks.column_names else ""
    return host, str(tracks.column("process")[i].as_py() or "")


def _columns(slices: pa.Table, of_track: np.ndarray) -> _Columns:
    track = slices.column("track_id").to_numpy().astype(I64)
    rank = of_track[track] if len(track) else np.zeros(0, I64)
    ts = slices.column("ts_ns").to_numpy().astype(I64)
    end = ts + slices.column("dur_ns").to_numpy().astype(I64)
    device = slices.column("device_time").to_numpy(zero_copy_only=False).astype(bool)
    framework = np.asarray(pc.equal(slices.column("lane"), Lane.FRAMEWORK.value).to_numpy(zero_copy_only=False), bool)
    names = pc.fill_null(slices.column("name"), "")
    is_step = framework & np.asarray(pc.starts_with(names, DEFAULT_STEP_ANNOTATION).to_numpy(zero_copy_only=False), bool)
    is_op = slices.column("is_op").to_numpy(zero_copy_only=False).astype(bool)
    # a rank with device executions is read from them; a host-only rank from its framework ops
    device_mode = np.isin(rank, np.unique(rank[device & (rank >= 0)]))
    cand = np.flatnonzero((device_mode & device) | (~device_mode & framework & is_op & ~is_step & (rank >= 0)))
    take = pa.array(cand, pa.int64())
    cats = categorize(names.take(take).combine_chunks(), pc.fill_null(slices.column("cat"), "").take(take).combine_chunks())
    index = {p: k for k, p in enumerate(_PARTS)}
    part = np.full(len(ts), -1, np.int8)
    part[cand] = [index[part_of(str(c))] if part_of(str(c)) in index else index["other"] for c in cats.to_pylist()]
    host_only = cand[~device_mode[cand]]
    part[host_only] = np.where(part[host_only] == index["communication"], index["communication"], index["compute"])
    return _Columns(rank, ts, end, part, device_mode, is_step, np.asarray(names.to_pylist(), dtype=object))


def _rank_row(cols: _Columns, rank: int, origin_ns: int, where: tuple[str, str]) -> RankRow:
    idx = np.flatnonzero(cols.rank == rank)
    steps_at = idx[cols.is_step[idx]]
    steps_at = steps_at[np.lexsort((cols.end[steps_at], cols.ts[steps_at]))]
    steps: list[RankStep] = [{"name": str(cols.names[i]), "start_ns": int(cols.ts[i]) - origin_ns,
                              "dur_ns": int(cols.end[i] - cols.ts[i])} for i in steps_at.tolist()]
    if len(steps_at):
        lo, hi = union_segments(cols.ts[steps_at], cols.end[steps_at])
    elif len(idx):  # no steps: the rank's whole span (min with initial=0 would start every window at 0 ns)
        lo = np.asarray([cols.ts[idx].min()], I64)
        hi = np.maximum(np.asarray([cols.end[idx].max()], I64), lo)
    else:
        lo = hi = np.zeros(1, I64)
    window = int((hi - lo).sum())
    ex = idx[cols.part[idx] >= 0]
    a, b, part = cols.ts[ex], cols.end[ex], cols.part[ex]

    def union(mask: np.ndarray) -> int:
        return int(covered_between(*union_segments(a[mask], b[mask]), lo, hi).sum())

    compute, comm = union(part == 0), union(part == 1)
    both = union((part == 0) | (part == 1))
    busy = union(np.ones(len(ex), bool))
    hidden = compute + comm - both
    step_durs = [s["dur_ns"] for s in steps]
    return {"rank": rank, "host": where[0], "process": where[1],
            "mode": "device" if bool(cols.device[idx].any()) else "host", "steps": steps,
            "step_time_ns": _median_low(step_durs) if step_durs else window, "window_ns": window,
            "compute_ns": compute, "comm_ns": comm, "memcpy_ns": union(part == 2),
            "exposed_comm_ns": comm - hidden, "hidden_comm_ns": hidden, "idle_ns": window - busy,
            "busy_pct": 100.0 * busy / window if window else 0.0, "arrival_late_ns": 0, "last_arrivals": 0,
            "matched_collectives": 0, "wait_caused_ns": 0, "step_start_late_ns": 0, "straggler": False,
            "evidence": None}


def _arrivals(collectives: list[CollectiveRow], rows: list[RankRow]) -> dict[int, str]:
    """Per rank, from the matched collectives of two or more ranks: its largest lower-median lateness to a
    collective name (arrival_late_ns, and that name, returned), how many it is in, how many it arrived
    last to and the wait it caused there (the collective's wait_ns)."""
    by_rank = {r["rank"]: r for r in rows}
    late: dict[tuple[int, str], list[int]] = {}
    for c in collectives:
        if len(c["ranks"]) < 2:
            continue
        median = _median_low([x["arrival_ns"] for x in c["ranks"]])
        for x in c["ranks"]:
            row = by_rank.get(x["rank"])
            if row is None:
                continue
            row["matched_collectives"] += 1
            late.setdefault((x["rank"], c["name"]), []).append(x["arrival_ns"] - median)
        if c["last_arriver"] in by_rank:
            by_rank[c["last_arriver"]]["last_arrivals"] += 1
            by_rank[c["last_arriver"]]["wait_caused_ns"] += c["wait_ns"]
    names: dict[int, str] = {}
    for (rank, name), values in sorted(late.items()):
        lateness = _median_low(values)
        if lateness > by_rank[rank]["arrival_late_ns"]:
            by_rank[rank]["arrival_late_ns"], names[rank] = lateness, name
    return names


def _step_starts(rows: list[RankRow]) -> tuple[int, int]:
    """Steps matched across ranks by name (once on every rank, all of them running at one moment: ranks of
    one job, on one clock): each rank's lower-median lateness of its step start to the lower median start
    (step_start_late_ns); returns how many matched and the largest spread of one step's starts."""
    if len(rows) < 2:
        return 0, 0
    steps: dict[str, dict[int, list[tuple[int, int]]]] = {}
    for row in rows:
        for st in row["steps"]:
            steps.setdefault(st["name"], {}).setdefault(row["rank"], []).append((st["start_ns"], st["dur_ns"]))
    matched = {n: {r: v[0][0] for r, v in per.items()} for n, per in steps.items()
               if len(per) == len(rows) and all(len(v) == 1 for v in per.values())
               and max(v[0][0] for v in per.values()) < min(v[0][0] + v[0][1] for v in per.values())}
    late: dict[int, list[int]] = {row["rank"]: [] for row in rows}
    skew = 0
    for per in matched.values():
        median = _median_low(list(per.values()))
        skew = max(skew, max(per.values()) - min(per.values()))
        for rank, start in per.items():
            late[rank].append(start - median)
    for row in rows:
        row["step_start_late_ns"] = _median_low(late[row["rank"]])
    return len(matched), skew


def _flag(rows: list[RankRow], median: int, late_to: dict[int, str], by_arrival: bool) -> None:
    """Apply the straggler rule (module docstring): arrival to collectives, else to steps, else (a run
    without matched collectives) step time; the first that holds is the evidence."""
    times = np.asarray([r["step_time_ns"] for r in rows], dtype=np.float64)
    iqr = float(np.subtract(*np.percentile(times, [75, 25]))) if len(times) else 0.0
    step_limit = median + max(STEP_OUTLIER_FRACTION * median, STEP_IQR_FACTOR * iqr)
    limit = ARRIVAL_LATE_FRACTION * median
    for row in rows:
        evidence = None
        if len(rows) > 1 and median > 0 and row["arrival_late_ns"] > limit:
            evidence = _stub("arrival", row["arrival_late_ns"], late_to.get(row["rank"], ""), row["rank"])
        elif len(rows) > 1 and median > 0 and row["step_start_late_ns"] > limit:
            evidence = _stub("step_start", row["step_start_late_ns"], "", row["rank"])
        elif len(rows) > 1 and not by_arrival and row["step_time_ns"] > step_limit:
            evidence = _stub("step_time", row["step_time_ns"] - median, "", row["rank"])
        row["straggler"], row["evidence"] = evidence is not None, evidence


def _unmatched(m: CollectiveMismatch) -> UnmatchedCollective:
    return {"name": m["name"], "counts": [{"rank": int(r), "count": int(n)} for r, n in m["counts"].items()],
            "message": m["message"]}


def _stub(rule: str, late_ns: int, collective: str, rank: int) -> RankEvidence:
    return {"rule": rule, "late_ns": int(late_ns), "collective": collective, "kind": "", "name": "", "rank": rank,
            "reference_rank": rank, "excess_ns": 0}


def _median_low(values: list[int]) -> int:
    """The lower median: an observed value (integer ns), the smaller middle one of an even count."""
    return int(sorted(values)[(len(values) - 1) // 2]) if values else 0
