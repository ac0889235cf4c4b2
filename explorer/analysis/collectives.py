"""Collectives matched across ranks (by process group and sequence number, else by order of one name in a
group), with each rank's arrival and wait, transfer time, size and bandwidth; unmatched ones are
mismatches. Pure functions over a run's columns. Definitions: docs/architecture.md,
"analysis/collectives.py"."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.gap_evidence import timeline_window
from explorer.errors import BadRequest
from explorer.model.ranks import rank_by_track
from explorer.model.shapes import (
    CollectiveLink,
    CollectiveMismatch,
    CollectiveRank,
    CollectiveRow,
    CollectivesResult,
)

# Collective kernels outside NCCL/RCCL, searched anywhere in the (demangled) kernel name: (regex, the
# collective's name, where the name comes from). A rank's symm_mem host op is not an execution when the
# rank has one of these kernels (the kernel is; HOST_OPS below).
OTHER_KERNELS: tuple[tuple[str, str, str], ...] = (
    (r"(?:multimem|one_shot|two_shot)_all_reduce_kernel", "allreduce",
     "PyTorch symmetric memory, torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu: "
     "multimem_all_reduce_kernel, multimem_one_shot_all_reduce_kernel, one_shot_all_reduce_kernel, "
     "two_shot_all_reduce_kernel(_inplace)"),
    (r"multimem_all_gather_kernel", "allgather", "PyTorch symmetric memory (as above)"),
    (r"(?:^|[\s:])cross_device_reduce_[12]stage", "allreduce",
     "vLLM / SGLang custom all-reduce, csrc/custom_all_reduce.cuh"),
    (r"(?:^|[\s:])deep_ep::\w+::(?:dispatch|combine)\b", "alltoall",
     "DeepEP expert-parallel dispatch / combine kernels (deep_ep::intranode, ::internode, ::internode_ll)"),
    (r"(?:^|[\s:])nvshmem\w*_(?:alltoall|fcollect|broadcast|reduce)", "nvshmem",
     "NVSHMEM device collectives (nvshmemi_*_alltoall, _fcollect, _broadcast, _reduce kernels)"),
)
# Host ops that are collectives: (regex, group 1 the collective's name before normalize_name()). The
# symm_mem ops (no record_param_comms, no NCCL kernel) count on a rank none of whose kernels of
# OTHER_KERNELS ran; the c10d ops only on a rank with no NCCL kernel, gloo annotation, Neuron slice or
# record_param_comms (each of those is what a c10d call runs or records), the outermost of nested calls.
SYMM_MEM_OPS = r"^symm_mem::(?:multimem_|one_shot_|two_shot_)?(all_reduce|all_gather|reduce_scatter)_?(?:out)?$"
C10D_OPS = (r"^(?:c10d|_?c10d_functional)::(_?(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|all_?to_?all)"
            r"\w*)$")
HOST_CATS = frozenset({"cpu_op", "operator"})

# Execution sources, tried in this order per slice; (source, regex searched in the name, event categories
# or any). group 1 of the regex, when present, is the collective's name before normalize_name().
EXECUTIONS: tuple[tuple[str, str, frozenset[str]], ...] = (
    # ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_Generic(...); RCCL on ROCm names them alike
    ("nccl", r"^(?:void\s+)?(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", frozenset()),
    ("kernel", "|".join(f"(?:{k[0]})" for k in OTHER_KERNELS), frozenset({"kernel"})),
    ("gloo", r"^gloo:(\w+)$", frozenset({"user_annotation"})),  # torch 2.x CPU gloo worker-thread annotation
    ("neuron", r"^(cc_\w+)$", frozenset({"neuron_hw"})),  # Neuron collective execution (cc_running)
    # ProcessGroupNCCL's host annotation of a call (nccl:all_to_all): only where no kernel or named record is
    ("nccl_host", r"^nccl:(\w+)$", frozenset({"user_annotation", "cpu_op"})),
    ("symm_mem", SYMM_MEM_OPS, HOST_CATS),
    ("c10d", C10D_OPS, HOST_CATS),
    ("param_comms", r"^record_param_comms$", frozenset()),  # only on ranks with none of the above
)
DEVICE_SOURCES = ("nccl", "kernel", "gloo", "neuron")
LAUNCH_OPS = r"^c10d::"  # c10d::allreduce_, c10d::_allgather_base_: the host call of a gloo collective
NOT_COLLECTIVES = frozenset({"wait", ""})  # record_param_comms also marks work.wait()
# Kineto argument names (PyTorch ParamCommsUtils / Kineto NCCL metadata), first present wins.
ARG_FIELDS: dict[str, tuple[str, ...]] = {
    "name": ("Collective name",),
    "pg": ("Process Group Name", "pg_name"),
    "seq": ("Seq", "Collective sequence number", "seq"),
    "in_nelems": ("In msg nelems",),
    "out_nelems": ("Out msg nelems",),
    "dtype": ("dtype",),
    "group_size": ("Group size",),
}

# bytes per element: c10 ScalarType names (the `dtype` arg) and the `Input type` strings of record_shapes.
DTYPE_BYTES: dict[str, int] = {
    "double": 8, "float": 4, "half": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "long": 8, "int": 4, "short": 2, "char": 1, "byte": 1, "bool": 1,
    "signed char": 1, "unsigned char": 1, "c10::half": 2, "c10::bfloat16": 2,
    "complexfloat": 8, "complexdouble": 16,
}

# busbw = algbw x factor(n) (nccl-tests, doc/PERFORMANCE.md); names without a row get no busbw.
BUS_FACTORS: dict[str, Callable[[int], Fraction]] = {
    "allreduce": lambda n: Fraction(2 * (n - 1), n),
    "allgather": lambda n: Fraction(n - 1, n),
    "reducescatter": lambda n: Fraction(n - 1, n),
    "alltoall": lambda n: Fraction(n - 1, n),
    "broadcast": lambda n: Fraction(1),
    "reduce": lambda n: Fraction(1),
    "sendrecv": lambda n: Fraction(1),
    "send": lambda n: Fraction(1),
    "recv": lambda n: Fraction(1),
}

SORT_COLUMNS = ("wait_ns", "transfer_ns", "size_bytes", "algbw", "busbw", "seq", "name", "start_ns")
TEXT_SORTS = frozenset({"name"})
DEFAULT_SORT = "-wait_ns"
_SUFFIXES = re.compile(r"_(?:base|into_tensor|tensor|coalesced)$")


def normalize_name(raw: str) -> str:
    """`c10d::_allgather_base_`, `nccl:all_gather`, `AllGather`, `allgather` -> `allgather`."""
    s = raw.lower().rsplit(":", 1)[-1].strip("_")
    while (t := _SUFFIXES.sub("", s)) != s:
        s = t
    return s.replace("_", "")


@dataclass
class Instance:
    """One rank's execution of one collective (absolute ns)."""

    rank: int
    name: str
    pg: str
    seq: int | None
    arrival_ns: int
    start_ns: int
    end_ns: int
    slice_id: int
    in_bytes: int | None = None
    out_bytes: int | None = None
    dtype: str = ""
    group_size: int | None = None


@dataclass
class Matched:
    name: str
    pg: str
    seq: int
    matched_by: str
    members: list[Instance] = field(default_factory=list)


def has_executions(slices: pa.Table) -> bool:
    """Whether any slice is named like a collective execution (the run nav's cheap test: distinct names
    only, no args read, no matching)."""
    return bool(args_names(slices))


def args_names(slices: pa.Table) -> list[str]:
    """The distinct names of the slices whose args the matcher reads: the executions (gloo's c10d calls
    are read for their start only)."""
    unique = pc.unique(slices.column("name"))
    hit = pc.match_substring_regex(unique, "|".join(e[1] for e in EXECUTIONS))
    return sorted(unique.filter(pc.fill_null(hit, False)).to_pylist())


def candidate_mask(slices: pa.Table) -> np.ndarray:
    """The slices the matcher reads: the executions and gloo's c10d calls (their arrivals)."""
    names = slices.column("name")
    unique = pc.unique(names)  # few distinct names: the regex runs on those, not on every slice
    hit = pc.match_substring_regex(unique, "|".join([*(e[1] for e in EXECUTIONS), LAUNCH_OPS]))
    wanted = unique.filter(pc.fill_null(hit, False))
    return np.asarray(pc.is_in(names, value_set=wanted).to_numpy(zero_copy_only=False), dtype=bool)


def compute_collectives(slices: pa.Table, args: Mapping[int, str], flows: pa.Table, tracks: pa.Table,
                        default_rank: int = 0) -> tuple[list[Matched], list[CollectiveMismatch]]:
    """Every rank's collectives, matched (absolute ns; collective_row makes them relative). `args`:
    slice_id -> args JSON text of the executions (args_names); `default_rank`: the rank of
    tracks whose rank is unknown (a single-file run: its distributedInfo rank)."""
    instances = _instances(slices, args, flows, tracks, default_rank)
    return _match(instances)


def _instances(slices: pa.Table, args: Mapping[int, str], flows: pa.Table, tracks: pa.Table,
               default_rank: int) -> list[Instance]:
    sub = slices.filter(pa.array(candidate_mask(slices)))
    ranks = rank_by_track(tracks)
    launch = _launch_starts(slices, flows, sub)
    by_rank: dict[int, dict[str, list[Instance]]] = defaultdict(lambda: defaultdict(list))
    c10d: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for row in sub.to_pylist():
        rank = ranks.get(int(row["track_id"]), default_rank)
        name = str(row["name"])
        if re.match(LAUNCH_OPS, name):
            c10d[rank][normalize_name(name)].append(int(row["ts_ns"]))
        for source, pattern, cats in EXECUTIONS:
            m = re.search(pattern, name)
            if m and (not cats or str(row["cat"]).lower() in cats):
                raw = next((g for g in m.groups() if g), "") or _kernel_name(name)
                inst = _instance(row, rank, raw, _args(args.get(int(row["slice_id"]))))
                if inst is not None:
                    if source in ("nccl", "kernel"):  # Neuron cc_* slices have no launch of their own
                        inst.arrival_ns = launch.get(inst.slice_id, inst.start_ns)
                    by_rank[rank][source].append(inst)
                break
    out: list[Instance] = []
    for rank, sources in by_rank.items():
        _pair_gloo_arrivals(sources.get("gloo", []), c10d[rank])
        found = [i for s in DEVICE_SOURCES for i in sources.get(s, [])] or sources.get("param_comms", [])
        if not any(sources.get(s) for s in ("nccl", "gloo", "neuron", "param_comms")):
            # no kernel, annotation or named record of their own: the host's own marks of the calls
            found += sources.get("nccl_host") or _outermost(sources.get("c10d", []))
        out.extend(found + ([] if sources.get("kernel") else sources.get("symm_mem", [])))
    return out


def _kernel_name(name: str) -> str:
    """The collective's name of an OTHER_KERNELS kernel (its table row)."""
    return next((n for pattern, n, _ in OTHER_KERNELS if re.search(pattern, name)), "")


def _outermost(instances: list[Instance]) -> list[Instance]:
    """The host ops not inside another of the list (`_c10d_functional::all_reduce` around `c10d::allreduce_`)."""
    out: list[Instance] = []
    for i in sorted(instances, key=lambda i: (i.start_ns, -i.end_ns)):
        if not out or i.start_ns >= out[-1].end_ns:
            out.append(i)
    return out


def _args(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _field(args: dict[str, Any], key: str) -> Any:
    return next((args[k] for k in ARG_FIELDS[key] if k in args), None)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _instance(row: dict[str, Any], rank: int, raw_name: str, args: dict[str, Any]) -> Instance | None:
    name = normalize_name(str(_field(args, "name") or raw_name))
    if name in NOT_COLLECTIVES:
        return None
    start = int(row["ts_ns"])
    dtype = str(_field(args, "dtype") or "")
    inst = Instance(rank, name, str(_field(args, "pg") or ""), _int(_field(args, "seq")), start, start,
                    start + int(row["dur_ns"]), int(row["slice_id"]), dtype=dtype,
                    group_size=_int(_field(args, "group_size")))
    size = DTYPE_BYTES.get(dtype.lower())
    nin, nout = _int(_field(args, "in_nelems")), _int(_field(args, "out_nelems"))
    if size is not None and (nin is not None or nout is not None):
        inst.in_bytes = None if nin is None else nin * size
        inst.out_bytes = None if nout is None else nout * size
    elif "Input Dims" in args:
        inst.in_bytes, inst.dtype = _input_bytes(args)
    return inst


def _input_bytes(args: dict[str, Any]) -> tuple[int | None, str]:
    """Bytes of the first input of a record_shapes annotation (`Input Dims` [[1024]], `Input type` [float])."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not (isinstance(dims, list) and dims and isinstance(dims[0], list) and isinstance(types, list) and types):
        return None, ""
    dtype = str(types[0])
    size = DTYPE_BYTES.get(dtype.lower())
    if size is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims[0]):
        return None, dtype
    return int(np.prod(dims[0], dtype=object)) * size, dtype


def _launch_starts(slices: pa.Table, flows: pa.Table, sub: pa.Table) -> dict[int, int]:
    """slice_id of a kernel -> start of the runtime call that launched it (its execute/launch flow), else
    of the framework op it belongs to (op_id)."""
    ts = slices.column("ts_ns").to_numpy()
    ids = slices.column("slice_id").to_numpy()
    pos = {int(s): i for i, s in enumerate(ids)} if not np.array_equal(ids, np.arange(len(ids))) else None

    def start(sid: int) -> int | None:
        i = sid if pos is None else pos.get(sid)
        return int(ts[i]) if i is not None and 0 <= i < len(ts) else None

    out: dict[int, int] = {}
    dev = sub.filter(sub.column("device_time"))
    for sid, op in zip(dev.column("slice_id").to_pylist(), dev.column("op_id").to_pylist(), strict=True):
        s = start(int(op)) if op is not None and op >= 0 else None
        if s is not None:
            out[int(sid)] = s
    if len(flows) and len(dev):
        wanted = pc.is_in(flows.column("to_slice"), value_set=dev.column("slice_id").combine_chunks())
        hits = flows.filter(pc.and_(wanted, pc.is_in(flows.column("kind"), value_set=pa.array(["execute", "launch"]))))
        for src, dst in zip(hits.column("from_slice").to_pylist(), hits.column("to_slice").to_pylist(), strict=True):
            s = start(int(src))
            if s is not None:
                out[int(dst)] = s
    return out


def _pair_gloo_arrivals(executions: list[Instance], calls: dict[str, list[int]]) -> None:
    """The k-th gloo:<op> of a rank arrived at the k-th c10d::<op> call of the same name (gloo runs the
    collective on a worker thread the call enqueued it on); unequal counts keep arrival = start."""
    by_name: dict[str, list[Instance]] = defaultdict(list)
    for inst in sorted(executions, key=lambda i: i.start_ns):
        by_name[inst.name].append(inst)
    for name, found in by_name.items():
        starts = sorted(calls.get(name, []))
        if len(starts) == len(found):
            for inst, ts in zip(found, starts, strict=True):
                inst.arrival_ns = min(ts, inst.start_ns)


def _match(instances: list[Instance]) -> tuple[list[Matched], list[CollectiveMismatch]]:
    by_pg: dict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        by_pg[inst.pg].append(inst)
    matched: list[Matched] = []
    mismatches: list[CollectiveMismatch] = []
    for pg, members in sorted(by_pg.items()):
        expected = sorted({i.rank for i in members})
        if all(i.seq is not None for i in members):
            groups: dict[tuple[int, str], list[Instance]] = defaultdict(list)
            for i in members:
                groups[(int(i.seq or 0), "")].append(i)
            _collect(pg, groups, expected, "seq", matched, mismatches)
            continue
        for name in sorted({i.name for i in members}):
            mine = [i for i in members if i.name == name]
            counts = Counter(i.rank for i in mine)
            if len(set(counts.values())) > 1 or set(counts) != set(expected):
                mismatches.append(_mismatch(name, pg, None, sorted(counts), expected, counts,
                                            "ranks hold different numbers of this collective and the trace "
                                            "has no sequence numbers: not paired by order"))
                continue
            order: dict[tuple[int, str], list[Instance]] = defaultdict(list)
            per_rank: dict[int, int] = Counter()
            for i in sorted(mine, key=lambda i: (i.rank, i.start_ns)):
                order[(per_rank[i.rank], name)].append(i)
                per_rank[i.rank] += 1
            _collect(pg, order, expected, "order", matched, mismatches)
    return matched, mismatches


def _collect(pg: str, groups: dict[tuple[int, str], list[Instance]], expected: list[int], matched_by: str,
             matched: list[Matched], mismatches: list[CollectiveMismatch]) -> None:
    for (seq, _), members in sorted(groups.items()):
        names = Counter(i.name for i in members)
        name = names.most_common(1)[0][0]
        counts = Counter(i.rank for i in members)
        present = sorted(counts)
        if present != expected or len(names) > 1:
            why = (f"ranks {', '.join(map(str, sorted(set(expected) - set(present))))} lack it" if present != expected
                   else f"ranks disagree on the collective: {', '.join(sorted(names))}")
            mismatches.append(_mismatch(name, pg, seq, present, expected, counts, why))
            continue
        matched.append(Matched(name, pg, seq, matched_by, _merge_per_rank(members)))


def _merge_per_rank(members: list[Instance]) -> list[Instance]:
    """One Instance per rank; several executions of one collective on a rank (split kernels) merge into
    their earliest arrival and start and latest end."""
    out: dict[int, Instance] = {}
    for i in sorted(members, key=lambda i: (i.rank, i.start_ns)):
        first = out.setdefault(i.rank, i)
        if first is not i:
            first.arrival_ns, first.end_ns = min(first.arrival_ns, i.arrival_ns), max(first.end_ns, i.end_ns)
    return [out[r] for r in sorted(out)]


def _mismatch(name: str, pg: str, seq: int | None, present: list[int], expected: list[int],
              counts: Mapping[int, int], why: str) -> CollectiveMismatch:
    missing = sorted(set(expected) - set(present))
    where = f"seq {seq}" if seq is not None else "by order"
    return {"name": name, "process_group": pg, "seq": seq, "ranks_present": present, "ranks_missing": missing,
            "counts": {str(r): int(counts.get(r, 0)) for r in expected},
            "message": f"{name} in group {pg or '(default)'} ({where}): {why}"}


def collective_row(m: Matched, origin_ns: int, span_ns: int) -> CollectiveRow:
    """The API row of one matched collective (the definitions in the module docstring); `timeline` opens
    the first arrival to the last end (gap_evidence.timeline_window)."""
    last = max(i.arrival_ns for i in m.members)
    last_rank = min(i.rank for i in m.members if i.arrival_ns == last)
    ranks: list[CollectiveRank] = [
        {"rank": i.rank, "arrival_ns": i.arrival_ns - origin_ns, "start_ns": i.start_ns - origin_ns,
         "end_ns": i.end_ns - origin_ns, "wait_ns": last - i.arrival_ns, "slice_id": i.slice_id} for i in m.members]
    transfer = max(0, max(i.end_ns for i in m.members) - max(i.start_ns for i in m.members))
    n = next((i.group_size for i in m.members if i.group_size), None) or len(m.members)
    size = _size(m, n)
    algbw = size / transfer if size is not None and transfer > 0 else None
    factor = BUS_FACTORS.get(m.name)
    busbw = (float(Fraction(size, transfer) * factor(n)) if algbw is not None and size is not None and factor
             else None)
    return {"name": m.name, "process_group": m.pg, "seq": m.seq, "matched_by": m.matched_by, "size_bytes": size,
            "dtype": next((i.dtype for i in m.members if i.dtype), ""), "ranks": ranks,
            "wait_ns": sum(r["wait_ns"] for r in ranks), "transfer_ns": transfer, "last_arriver": last_rank,
            "algbw": algbw, "busbw": busbw,
            "timeline": timeline_window(min(r["arrival_ns"] for r in ranks), max(r["end_ns"] for r in ranks), span_ns)}


def _size(m: Matched, n: int) -> int | None:
    sizes = [max(b for b in (i.in_bytes, i.out_bytes) if b is not None) for i in m.members
             if i.in_bytes is not None or i.out_bytes is not None]
    if not sizes:
        return None
    first = m.members[0]
    if first.out_bytes is None and m.name == "allgather":
        return max(sizes) * n
    return max(sizes)


def collectives_result(rows: list[CollectiveRow], mismatches: list[CollectiveMismatch], sort: str = DEFAULT_SORT,
                       limit: int | None = None) -> CollectivesResult:
    """The `/api/runs/{id}/collectives` object from a run's rows (collective_row, made once per run):
    sorted (`-col` descending, `+col` ascending, a bare column descending unless it is text; ties and
    missing values by first start), cut to `limit`."""
    key = sort.lstrip("-+")
    if key not in SORT_COLUMNS:
        raise BadRequest(f"cannot sort collectives by {sort!r}; columns: {', '.join(SORT_COLUMNS)}")
    by_start = sorted(rows, key=_first_start)
    desc = sort.startswith("-") or (key not in TEXT_SORTS and not sort.startswith("+"))
    present = [r for r in by_start if _sort_value(r, key) is not None]
    present.sort(key=lambda r: _sort_value(r, key), reverse=desc)
    ordered = present + [r for r in by_start if _sort_value(r, key) is None]
    ranks = sorted({x["rank"] for r in rows for x in r["ranks"]} | {x for mm in mismatches for x in mm["ranks_present"]})
    return {"rows": ordered if limit is None else ordered[:max(0, limit)], "total": len(rows), "ranks": ranks,
            "mismatches": mismatches, "total_wait_ns": sum(r["wait_ns"] for r in rows), "sort": sort}


def _first_start(row: CollectiveRow) -> int:
    return min(x["start_ns"] for x in row["ranks"])


def _sort_value(row: CollectiveRow, key: str) -> Any:
    if key == "start_ns":
        return _first_start(row)
    return row[key]  # type: ignore[literal-required]


def collective_links(rows: list[CollectiveRow], start_ns: int, end_ns: int, limit: int = 2000) -> list[CollectiveLink]:
    """The collectives of two or more ranks with an execution overlapping [start_ns, end_ns) (relative
    ns), each as its ranks' execution slice ids: what the timeline's collectives overlay connects. The
    first `limit` by start."""
    out: list[CollectiveLink] = []
    for r in sorted(rows, key=_first_start):
        if len(r["ranks"]) > 1 and max(x["end_ns"] for x in r["ranks"]) >= start_ns and _first_start(r) < end_ns:
            out.append({"name": r["name"], "process_group": r["process_group"], "seq": r["seq"],
                        "last_arriver": r["last_arriver"], "ranks": [x["rank"] for x in r["ranks"]],
                        "slice_ids": [x["slice_id"] for x in r["ranks"]]})
            if len(out) >= limit:
                break
    return out
