"""Multi-file runs parsed several files at once, on threads of the ingest's process or in worker processes
(explorer/ingest/parallel.py), and merged from their parts
(explorer/ingest/parts.py) give the run a one-process ingest gives: every table, the warnings, the metadata
and the stored summary equal, on constructed ranks, on both parser paths (small files through msgspec,
big ones through DuckDB, with their args spilled to disk), with bad files among good ones, and on a real gloo
capture; the workers keep to the run's memory budget and their parse time joins the run's split."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bench.synth_ranks import RankPlan, write_rank_traces
from explorer.config import Settings
from explorer.errors import BadTrace
from explorer.ingest import parallel
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome.fast import BATCH_ROW_BYTES, FAST_MIN_BYTES
from explorer.ingest.chrome.spill import SpilledArgs
from explorer.ingest.limits import IngestLimits
from explorer.ingest.linked import LinkedParts
from explorer.ingest.parallel import PARALLEL_MIN_BYTES, START_METHOD, parse_parts, use_parallel
from explorer.ingest.parts import (
    CARRIED_BOOK,
    CARRIED_BUILDER,
    TABLES,
    Part,
    PartJob,
    load_part,
    merge,
    parse_here,
    parse_part,
    read_part,
    write_part,
)
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import Inputs, Member, collect_inputs
from explorer.model.lanes import FlowKind
from explorer.model.split import CPU_KEY, SPLIT_KEY
from explorer.model.tables import IngestedTrace
from explorer.store.runs import build_summary
from tests.ranks.conftest import gloo_capture, straggler_traces  # noqa: F401 - session fixtures used here

LIMITS = IngestLimits(processes=2)
PARSE_IN = ["threads", "processes"]  # where a multi-file run's other parsers run (Settings.ingest_parse_in)


@pytest.fixture(params=PARSE_IN)
def parse_in(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def ingest(paths: list[Path], parallel: bool, parse_in: str = "threads") -> IngestedTrace:
    inputs = collect_inputs(paths)
    try:
        return ingest_inputs(inputs, limits=replace(LIMITS, parse_in=parse_in), parallel=parallel)
    finally:
        inputs.cleanup()


def ordered_args(trace: IngestedTrace) -> list[str | None]:
    """The slices' args in slice order: the column, or read back from disk when they were spilled."""
    if trace.slice_args is None:
        return list(trace.tables["slices"].column("args").to_pylist())
    return [a for batch in trace.slice_args.batches(1000) for a in batch.to_pylist()]


def assert_same_run(got: IngestedTrace, want: IngestedTrace) -> None:
    """Every table equal (schema, values, order), the args (held or spilled), the warnings, metadata (the
    time split: the same steps; its times are measurements) and summary."""
    assert sorted(got.tables) == sorted(want.tables)
    for name, table in want.tables.items():
        assert got.tables[name].equals(table), f"table {name} differs"
    assert (got.slice_args is None) is (want.slice_args is None)
    assert ordered_args(got) == ordered_args(want)
    assert got.warnings == want.warnings
    got_meta, want_meta = dict(got.meta), dict(want.meta)
    for key in (SPLIT_KEY, CPU_KEY):
        assert sorted(got_meta.pop(key)) == sorted(want_meta.pop(key))
    assert json.dumps(got_meta, sort_keys=True, default=str) == json.dumps(want_meta, sort_keys=True, default=str)
    assert build_summary(got, []) == build_summary(want, [])
    assert got.device_profiles == want.device_profiles


def complete_events(paths: list[Path]) -> list[dict[str, object]]:
    """The X events of the files, read independently of the parsers (times kept as Decimal)."""
    events: list[dict[str, object]] = []
    for path in paths:
        doc = json.loads(path.read_text(), parse_float=Decimal)
        base = int(doc.get("baseTimeNanoseconds", 0))
        events += [{**e, "ts_ns": base + int(Decimal(str(e["ts"])) * 1000)} for e in doc["traceEvents"]
                   if e.get("ph") == "X"]
    return events


def test_constructed_ranks_equal_the_one_process_ingest(straggler_traces: list[Path],  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch, parse_in: str) -> None:
    joined: list[int] = []
    original = LinkedParts.joined
    monkeypatch.setattr(LinkedParts, "joined", lambda self: joined.append(1) or original(self))
    parallel = ingest(straggler_traces, parallel=True, parse_in=parse_in)
    assert joined == [1]  # the parts linked themselves; the merged run only joined their results
    assert_same_run(parallel, ingest(straggler_traces, parallel=False))
    events = complete_events(straggler_traces)
    slices = parallel.tables["slices"]
    assert slices.num_rows == len(events)
    assert sorted(slices.column("ts_ns").to_pylist()) == sorted(int(str(e["ts_ns"])) for e in events)
    assert parallel.meta["ranks"] == [0, 1, 2, 3]


@pytest.mark.slow
def test_big_files_on_the_duckdb_path_and_small_ones_mixed(tmp_path: Path, parse_in: str) -> None:
    """Two files past FAST_MIN_BYTES (DuckDB batches: bulk slice chunks and bulk flow codes) after a small
    one (row-wise slices and flow steps), so the merge renumbers both kinds in one run."""
    big = write_rank_traces(tmp_path / "big", RankPlan(world=2, steps=10, units=1800, late_rank=1, late_ns=50_000))
    small = write_rank_traces(tmp_path / "small", RankPlan(world=3, steps=3, units=4))[2]
    assert all(p.stat().st_size > FAST_MIN_BYTES for p in big) and small.stat().st_size < FAST_MIN_BYTES
    paths = [small, *big]
    parallel = ingest(paths, parallel=True, parse_in=parse_in)
    assert_same_run(parallel, ingest(paths, parallel=False))
    assert parallel.tables["slices"].num_rows == len(complete_events(paths))
    assert parallel.tables["flows"].num_rows > 0


def test_a_bad_file_among_good_ones_is_a_warning(straggler_traces: list[Path], tmp_path: Path,  # noqa: F811
                                                 parse_in: str) -> None:
    """An unreadable file and one without events (its source is added before the parser finds that out)
    between good ones: the same warnings and tables as in one process."""
    broken = tmp_path / "rank-8.pt.trace.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "name": ')
    empty = tmp_path / "rank-9.pt.trace.json"
    empty.write_text('{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}}]}')
    paths = [straggler_traces[0], broken, straggler_traces[1], empty]
    parallel = ingest(paths, parallel=True, parse_in=parse_in)
    assert_same_run(parallel, ingest(paths, parallel=False))
    unreadable = {w.source for w in parallel.warnings if w.code == "unreadable_file"}
    assert unreadable == {broken.name, empty.name}


def test_when_every_file_is_bad_the_first_error_is_the_ingests(tmp_path: Path, parse_in: str) -> None:
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"rank-{i}.json")
        paths[-1].write_text('{"traceEvents": [')
    with pytest.raises(BadTrace) as sequential:
        ingest(paths, parallel=False)
    with pytest.raises(BadTrace) as parallel:
        ingest(paths, parallel=True, parse_in=parse_in)
    assert parallel.value.message == sequential.value.message
    assert parallel.value.message.startswith("rank-0.json: ")


def test_members_held_in_memory_travel_as_bytes(straggler_traces: list[Path], parse_in: str) -> None:  # noqa: F811
    def inputs() -> Inputs:
        return Inputs(members=[Member(p.name, data=p.read_bytes()) for p in straggler_traces[:3]])

    assert_same_run(ingest_inputs(inputs(), limits=replace(LIMITS, parse_in=parse_in), parallel=True),
                    ingest_inputs(inputs(), limits=LIMITS, parallel=False))


@pytest.mark.slow
def test_real_gloo_capture_equals_the_one_process_ingest(gloo_capture: list[Path]) -> None:  # noqa: F811
    parallel = ingest(gloo_capture, parallel=True)
    assert_same_run(parallel, ingest(gloo_capture, parallel=False))
    assert parallel.tables["slices"].num_rows == len(complete_events(gloo_capture))


UNGUARDED_SCRIPT = """
import sys
from pathlib import Path
from explorer.ingest.limits import IngestLimits
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
inputs = collect_inputs([Path(p) for p in sys.argv[1:]])
trace = ingest_inputs(inputs, limits=IngestLimits(processes=2, parse_in="processes"), parallel=True)
inputs.cleanup()
print("slices", trace.tables["slices"].num_rows)
"""


def test_a_script_without_the_main_guard_still_ingests(straggler_traces: list[Path], tmp_path: Path) -> None:  # noqa: F811
    """Workers import the main module (spawn and forkserver alike): a script that ingests at its top level
    makes every worker fail at start; the script's own process parses the files (those it took already, or,
    when the dead worker is noticed first, all of them) and the run is whole."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), *map(str, straggler_traces[:2])], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["slices", str(len(complete_events(straggler_traces[:2])))]


def feed(builder: TraceBuilder, label: str, shift_ns: int) -> None:
    """Every kind of raw state a parser can leave: row-wise and bulk slices, an explicit link, row-wise and
    bulk flow steps (one bulk step under a row-wise flow code), counters, instants, names, a warning."""
    src = builder.add_source(label, f"inst {label}")
    t0, t1 = builder.thread(src, 7, 1), builder.thread(src, 7, "gpu")
    builder.set_process_name(src, 7, "python")
    builder.set_thread_name(src, 7, 1, "main")
    builder.set_process_sort(src, 7, 3)
    builder.set_device(src, 7, "GPU 0")
    op = builder.add_slice(t0, "cpu_op", "aten::mm", 1_000 + shift_ns, 500, correlation=5, external_id=9)
    launch = builder.add_slice(t0, "cuda_runtime", "cudaLaunchKernel", 1_100 + shift_ns, 50, correlation=5)
    builder.add_slice_columns(
        np.array([t1, t1]), pa.array(["kernel", "kernel"]), pa.array(["k1", "k2"]),
        np.array([1_200, 1_900]) + shift_ns, np.array([300, 100]), pa.array(["{}", "{}"]), np.array([5, -1]),
        np.array([9, -1]), pa.array(["", ""]))
    builder.add_link(launch, op, FlowKind.LAUNCH)
    code = builder.flow_code(src, "ac2g", "5")
    bulk = builder.reserve_flow_codes(3) + 2  # a block of 3, as a bulk parser reserves it; its last code used
    # the row-coded flow: aten::mm -> k2; the bulk-coded one: cudaLaunchKernel -> k1
    builder.add_flow_points_columns(np.array([code, bulk, bulk]), np.array([2, 2, 2]), np.array([t1, t0, t1]),
                                    np.array([1_950, 1_120, 1_250]) + shift_ns, np.array([True, True, True]))
    builder.add_flow_point(src, "5", "ac2g", "s", t0, 1_450 + shift_ns, True)
    builder.add_counter(src, 7, "memory", 1_000 + shift_ns, 1.5)
    builder.add_counter(src, 7, "memory", 1_300 + shift_ns, 0.1)
    builder.add_instant(t0, 1_400 + shift_ns, "[memory]", "cpu_instant_event")
    builder.warn("bad_time", "events with a bad time", 2, label)


def test_a_part_merges_as_if_its_parser_had_run_in_the_builder(tmp_path: Path) -> None:
    """A builder fed a, b, c equals one fed a, then b's part (written and read back), then c."""
    direct = TraceBuilder()
    for i, label in enumerate("abc"):
        feed(direct, label, i * 10_000)
    merged, alone = TraceBuilder(), TraceBuilder()
    feed(merged, "a", 0)
    feed(alone, "b", 10_000)
    write_part(alone, tmp_path / "b", {"format": "chrome"}, None)
    assert merge(merged, load_part(tmp_path / "b")) == {"format": "chrome"}
    assert not (tmp_path / "b").exists()
    feed(merged, "c", 20_000)
    want, got = direct.finish(), merged.finish()
    for name, table in want.tables.items():
        assert got.tables[name].equals(table), f"table {name} differs"
    assert got.warnings == want.warnings
    assert got.tables["flows"].num_rows == want.tables["flows"].num_rows == 9  # per source: the link, launch -> k1, mm -> k2 (row-coded)


def feed_more(builder: TraceBuilder, label: str, shift_ns: int) -> None:
    """feed() and what only finish() sorts out: a slice overlapping without nesting (a sub-row), a flow of
    row-wise steps without a code yet (coded at the link), one whose end binds to nothing, a repeated link."""
    feed(builder, label, shift_ns)
    src = len(builder.sources) - 1
    t0 = builder.thread(src, 7, 1)
    builder.add_slice(t0, "cpu_op", "aten::add", 1_400 + shift_ns, 300)  # overlaps aten::mm's end
    builder.add_flow_point(src, "6", "fwdbwd", "s", t0, 1_010 + shift_ns, True)
    builder.add_flow_point(src, "6", "fwdbwd", "f", t0, 1_450 + shift_ns, True)
    builder.add_flow_point(src, "7", "ac2g", "s", t0, 1_020 + shift_ns, True)
    builder.add_flow_point(src, "7", "ac2g", "f", builder.thread(src, 7, 2), 1_500 + shift_ns, False)
    if label == "a":  # the link feed() adds, once more
        builder.add_link(0, 1, FlowKind.LAUNCH)


def test_parts_that_linked_themselves_join_as_one_builder_links(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A builder fed a, b, c equals one that merged their parts, each nested and linked in its own job
    (flows in one builder's order, the overlap and unbound-flow warnings counted once); the merged builder
    joins the parts' results instead of linking the whole run."""
    direct, merged = TraceBuilder(), TraceBuilder()
    for i, label in enumerate("abc"):
        feed_more(direct, label, i * 10_000)
        alone = TraceBuilder()
        feed_more(alone, label, i * 10_000)
        write_part(alone, tmp_path / label, {}, None, link=True)
        merge(merged, load_part(tmp_path / label))
    linked_whole: list[int] = []
    original = TraceBuilder.link
    monkeypatch.setattr(TraceBuilder, "link", lambda self, *a, **k: linked_whole.append(1) or original(self, *a, **k))
    got = merged.finish()
    assert not linked_whole
    want = direct.finish()
    for name, table in want.tables.items():
        assert got.tables[name].equals(table), f"table {name} differs"
    assert got.warnings == want.warnings
    assert {w.code for w in want.warnings} >= {"overlap", "flow_unbound"}


def test_a_run_with_more_than_linked_parts_is_linked_whole(tmp_path: Path) -> None:
    """A linked part followed by a file parsed in the merging builder: the parts' results do not cover every
    slice, so the whole run is linked, and equals the builder fed both."""
    direct, merged, alone = TraceBuilder(), TraceBuilder(), TraceBuilder()
    feed_more(direct, "a", 0)
    feed_more(direct, "b", 10_000)
    feed_more(alone, "a", 0)
    write_part(alone, tmp_path / "a", {}, None, link=True)
    merge(merged, load_part(tmp_path / "a"))
    feed_more(merged, "b", 10_000)
    assert not merged._linked.covers(merged.slice_count, merged.link_marks())
    got, want = merged.finish(), direct.finish()
    for name, table in want.tables.items():
        assert got.tables[name].equals(table), f"table {name} differs"
    assert got.warnings == want.warnings


def test_every_field_of_the_builder_travels_in_a_part() -> None:
    builder = TraceBuilder()
    assert sorted(vars(builder)) == sorted(CARRIED_BUILDER)
    assert sorted(vars(builder.threads)) == sorted(CARRIED_BOOK)


def test_a_parts_time_split_adds_to_the_runs(tmp_path: Path) -> None:
    """The split travels (the field list above names it): a part's steps (wall and CPU) are added to the run's."""
    merged, alone = TraceBuilder(), TraceBuilder()
    merged.split.add("parse", 5, 3)
    alone.split.add("parse", 7, 13)
    alone.split.add("feed", 11, 2)
    feed(alone, "b", 0)
    write_part(alone, tmp_path / "b", {}, None)
    merge(merged, load_part(tmp_path / "b"))
    assert merged.split.ns == {"parse": 12, "feed": 11}
    assert merged.split.cpu == {"parse": 16, "feed": 2}


def big_trace(folder: Path) -> Path:
    path = write_rank_traces(folder, RankPlan(world=1, steps=10, units=1800))[0]
    assert path.stat().st_size > FAST_MIN_BYTES  # the DuckDB path: its batches are what spill
    return path


def test_spilled_args_travel_in_a_part_and_stay_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process: a file parsed with its args spilled, written as a part and merged into another
    builder, finishes as the builder that parsed it; the part points at the spill files, which are read
    back from where the parse wrote them (the scratch folder), and are not copied into the part."""
    monkeypatch.setattr(chrome_fast, "SPILL_MIN_BYTES", 0)
    path, scratch = big_trace(tmp_path / "t"), tmp_path / "scratch"
    scratch.mkdir()
    direct, alone, merged = TraceBuilder(), TraceBuilder(), TraceBuilder()
    meta = chrome_fast.parse_chrome_file(path, path.name, direct, "inst", scratch)
    chrome_fast.parse_chrome_file(path, path.name, alone, "inst", scratch)
    write_part(alone, tmp_path / "part", meta, None)
    part = read_part(tmp_path / "part")
    spilled = part.state.books["spilled"]
    assert spilled and all(len(seg) == 4 and Path(seg[1]).parent == scratch for seg in spilled)
    assert part.state.slices.column("args").null_count == part.state.slices.num_rows
    merge(merged, part)
    assert all(isinstance(c.args, SpilledArgs) for c in merged._chunks)
    want, got = direct.finish(), merged.finish()
    assert want.slice_args is not None and "args" not in want.tables["slices"].column_names
    for name, table in want.tables.items():
        assert got.tables[name].equals(table), f"table {name} differs"
    args = ordered_args(got)
    assert args == ordered_args(want)
    events = {(e["name"], int(str(e["ts_ns"]))): e.get("args") for e in complete_events([path])}
    names, ts = got.tables["slices"].column("name").to_pylist(), got.tables["slices"].column("ts_ns").to_pylist()
    assert len(args) == len(events)
    assert all(json.loads(a or "{}") == json.loads(json.dumps(events[(n, t)] or {}, default=float))
               for n, t, a in zip(names, ts, args, strict=True))


def test_a_moved_part_is_relocated_and_still_reads_its_spilled_args(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A part whose folder (with its spill files) moved, as a queue worker's part does between machines:
    Part.relocate points its spilled args at the new place, and the merge reads the same args back."""
    monkeypatch.setattr(chrome_fast, "SPILL_MIN_BYTES", 0)
    path, scratch = big_trace(tmp_path / "t"), tmp_path / "old" / "scratch"
    scratch.mkdir(parents=True)
    direct, alone, merged = TraceBuilder(), TraceBuilder(), TraceBuilder()
    meta = chrome_fast.parse_chrome_file(path, path.name, direct, "inst", None)
    chrome_fast.parse_chrome_file(path, path.name, alone, "inst", scratch)
    write_part(alone, tmp_path / "old" / "part", meta, None)
    (tmp_path / "old").rename(tmp_path / "new")
    part = read_part(tmp_path / "new" / "part")
    part.relocate(str(tmp_path / "old"), str(tmp_path / "new"))
    spilled = [seg for seg in part.state.books["spilled"] if len(seg) > 1]
    assert spilled and all(Path(seg[1]).parent == tmp_path / "new" / "scratch" and Path(seg[1]).exists()
                           for seg in spilled)
    merge(merged, part)
    assert ordered_args(merged.finish()) == ordered_args(direct.finish())


@pytest.mark.slow
def test_a_parallel_run_with_spilled_args_equals_the_one_process_ingest(tmp_path: Path, parse_in: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Big files with their args spilled, end to end: every file's args spill in the run's scratch folder and
    the merged run reads them back as the one-process run does. (Which process parses which file is the
    pool's timing: a real worker's spill is proven by the test below.)"""
    monkeypatch.setattr(chrome_fast, "SPILL_MIN_BYTES", 0)
    paths = write_rank_traces(tmp_path / "big", RankPlan(world=3, steps=10, units=1800, late_rank=1, late_ns=50_000))
    assert all(p.stat().st_size > FAST_MIN_BYTES for p in paths)
    inputs = [collect_inputs(paths) for _ in range(2)]  # the spill files live until each run's cleanup
    try:
        limits = replace(LIMITS, parse_in=parse_in)
        parallel, one = (ingest_inputs(i, limits=limits, parallel=p) for i, p in zip(inputs, (True, False), strict=True))
        assert parallel.slice_args is not None
        assert_same_run(parallel, one)
        assert len(ordered_args(parallel)) == len(complete_events(paths))
        scratch = inputs[0].scratch
        assert scratch is not None and len(list(scratch.glob("*.args.arrow"))) == len(paths)  # one per file
    finally:
        for i in inputs:
            i.cleanup()
    assert not any(i.scratch is not None and i.scratch.exists() for i in inputs)


def test_a_workers_spilled_args_are_read_back_by_the_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real worker handed the run's threshold (0) spills in the scratch folder; once its part folder is
    gone the merged builder still reads the args there, and finishes as a builder that parsed the file."""
    monkeypatch.setattr(chrome_fast, "SPILL_MIN_BYTES", 0)  # this process only: the worker gets it in the job
    path, scratch = big_trace(tmp_path / "t"), tmp_path / "scratch"
    scratch.mkdir()
    job = PartJob(path.name, tmp_path / "part", LIMITS, "inst", path=path, scratch=scratch, spill_min_bytes=0)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context(START_METHOD)) as pool:
        part = load_part(pool.submit(parse_part, job).result())
    assert not job.out.exists()
    assert [Path(seg[1]).parent for seg in part.state.books["spilled"]] == [scratch] * len(part.state.books["spilled"])
    merged, direct = TraceBuilder(), TraceBuilder()
    merge(merged, part)
    chrome_fast.parse_chrome_file(path, path.name, direct, "inst", scratch)
    got, want = merged.finish(), direct.finish()
    for name, table in want.tables.items():
        assert got.tables[name].equals(table), f"table {name} differs"
    assert got.slice_args is not None and ordered_args(got) == ordered_args(want)


def test_the_runs_jobs_carry_its_budget_and_spill_threshold(straggler_traces: list[Path],  # noqa: F811
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """What the ingest hands each job (the pool itself is replaced here): its limits, memory_mb included,
    its scratch folder and this process's spill threshold."""
    monkeypatch.setattr(chrome_fast, "SPILL_MIN_BYTES", 12345)
    seen: list[PartJob] = []
    monkeypatch.setattr(parallel, "parse_parts", lambda jobs, processes, done, threads: seen.extend(jobs))
    limits = IngestLimits(processes=2, memory_mb=300)
    inputs = collect_inputs(straggler_traces)
    try:
        ingest_inputs(inputs, limits=limits, parallel=True)
    finally:
        inputs.cleanup()
    assert [job.name for job in seen] == [p.name for p in straggler_traces]
    # the run's budget and the cores split between the two processes parsing at once: together they keep to it
    cores = max(1, (os.cpu_count() or 1) // 2)
    assert all(job.limits == replace(limits, memory_mb=150, parse_threads=cores) and job.spill_min_bytes == 12345
               and job.scratch == inputs.scratch for job in seen)


def test_a_worker_keeps_to_the_runs_memory_budget(tmp_path: Path) -> None:
    """IngestLimits.memory_mb reaches a real worker: its DuckDB batches (one spilled segment each) are
    sized by the budget, as in this process, so a low budget gives more, smaller batches."""
    path = big_trace(tmp_path / "t")
    low, high = IngestLimits(processes=2, memory_mb=64), IngestLimits(processes=2, memory_mb=1500)
    context = multiprocessing.get_context(START_METHOD)
    segments: dict[int, list[int]] = {}
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        for limits in (low, high):
            job = PartJob(path.name, tmp_path / f"part{limits.memory_mb}", limits, "inst", path=path,
                          scratch=tmp_path, spill_min_bytes=0)
            part = load_part(pool.submit(parse_part, job).result())
            segments[limits.memory_mb] = [seg[0] for seg in part.state.books["spilled"]]
    rows = sum(segments[64])
    assert sum(segments[1500]) == rows
    assert max(segments[64]) <= 64 * 2**20 // BATCH_ROW_BYTES < rows
    assert len(segments[64]) > len(segments[1500])


def test_parse_parts_gives_every_part_in_job_order(straggler_traces: list[Path], tmp_path: Path,  # noqa: F811
                                                   parse_in: str) -> None:
    jobs = [PartJob(p.name, tmp_path / str(i), LIMITS, path=p) for i, p in enumerate(straggler_traces)]
    reported: list[str] = []
    parts = parse_parts(jobs, 2, lambda job: reported.append(job.name), threads=parse_in == "threads")
    assert parts is not None
    assert [part.state.books["sources"] for part in parts] == [[p.name] for p in straggler_traces]
    assert sorted(reported) == sorted(p.name for p in straggler_traces)
    assert parts[2].error is None and parts[2].meta is not None
    assert parts[2].meta["distributed_info"]["rank"] == 2
    assert not any(job.out.exists() for job in jobs)  # a worker's part folder is removed once read


@pytest.mark.parametrize("which", ["big", "broken"])
def test_a_worker_writes_the_part_the_ingests_process_would_hold(which: str, tmp_path: Path) -> None:
    """The same job run in a real forkserver worker (through the disk) and in this process (in memory)."""
    if which == "big":
        path = write_rank_traces(tmp_path / "t", RankPlan(world=1, steps=10, units=1800))[0]
        assert path.stat().st_size > FAST_MIN_BYTES
    else:
        path = tmp_path / "broken.json"
        path.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1}, {"ph": ')
    job = PartJob(path.name, tmp_path / "part", LIMITS, "inst", path=path, scratch=tmp_path)
    context = multiprocessing.get_context(START_METHOD)
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        from_worker = load_part(pool.submit(parse_part, job).result())
    here = parse_here(job)
    for name in TABLES:
        assert getattr(from_worker.state, name).equals(getattr(here.state, name)), name
    worker_books, books = dict(from_worker.state.books), dict(here.state.books)
    for key in ("split", "cpu"):  # the same steps; times measured
        assert sorted(worker_books.pop(key)) == sorted(books.pop(key))
    assert worker_books == books
    assert from_worker.meta == here.meta
    assert str(from_worker.error) == str(here.error)
    assert (here.error is None) is (which == "big")


@pytest.mark.parametrize(("sizes", "processes", "forced", "want"), [
    ([PARALLEL_MIN_BYTES], 2, True, False),  # one file: nothing to run beside it
    ([PARALLEL_MIN_BYTES, 1], 2, None, True),
    ([PARALLEL_MIN_BYTES // 4, 1], 2, None, False),  # small: the workers cost more than they save
    ([PARALLEL_MIN_BYTES, 1], 1, None, False),  # one process allowed
    ([1, 1], 1, True, True),
    ([PARALLEL_MIN_BYTES, PARALLEL_MIN_BYTES], 2, False, False),
])
def test_which_runs_take_the_parallel_path(sizes: list[int], processes: int, forced: bool | None,
                                           want: bool) -> None:
    assert use_parallel(sizes, processes, forced) is want


def test_the_setting_reaches_the_ingest() -> None:
    """EXPLORER_INGEST_PROCESSES -> Settings -> the IngestLimits the CLI and the app hand to every ingest."""
    assert IngestLimits.from_settings(Settings(ingest_processes=3)).processes == 3
    assert IngestLimits().processes == Settings().ingest_processes == 2
    assert IngestLimits.from_settings(Settings(ingest_parse_in="processes")).parse_in == "processes"
    assert IngestLimits().parse_in == Settings().ingest_parse_in == "threads"
    with pytest.raises(ValueError):
        Settings(ingest_parse_in="fibers")


def test_parse_threads_share_the_jobs(straggler_traces: list[Path], tmp_path: Path,  # noqa: F811
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """With threads, the ingest's thread and a parse thread each take jobs (from the end and from the start),
    in this process: no worker process is started."""
    took: dict[str, list[str]] = {}

    def recorded(job: PartJob) -> Part:
        took.setdefault(threading.current_thread().name, []).append(job.name)
        time.sleep(0.05)  # each job outlasts the other thread's start
        return parse_here(job)

    monkeypatch.setattr(parallel, "parse_here", recorded)
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", None)  # a process pool would fail the test
    jobs = [PartJob(p.name, tmp_path / str(i), LIMITS, path=p) for i, p in enumerate(straggler_traces)]
    parts = parse_parts(jobs, 2, threads=True)
    assert parts is not None and [part.state.books["sources"] for part in parts] == [[j.name] for j in jobs]
    assert sorted(took) == ["MainThread", "parse-0"]
    assert took["MainThread"][0] == jobs[-1].name and took["parse-0"][0] == jobs[0].name
    assert sorted(sum(took.values(), [])) == sorted(j.name for j in jobs)


def test_a_parse_threads_failure_is_the_ingests(straggler_traces: list[Path], tmp_path: Path,  # noqa: F811
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An error that is not the input's (a bug, MemoryError) raised on a parse thread stops the jobs not yet
    taken and is raised by parse_parts, as a worker process's is."""
    def failing(job: PartJob) -> Part:
        if job.name == straggler_traces[0].name:
            raise MemoryError("parse thread")
        time.sleep(0.05)
        return parse_here(job)

    monkeypatch.setattr(parallel, "parse_here", failing)
    jobs = [PartJob(p.name, tmp_path / str(i), LIMITS, path=p) for i, p in enumerate(straggler_traces)]
    with pytest.raises(MemoryError, match="parse thread"):
        parse_parts(jobs, 2, threads=True)
