"""Every number the pages claim equals the independent reading (tests/truth/reader.py) on every trace of the
corpus: the project's own fixtures, a real 2-rank gloo capture and the constructed 4-rank NCCL straggler
run made here, and every Kineto trace under ../shared/traces. Known misreadings are strict xfails (KNOWN):
they turn into failures the day the product is fixed, so the entry is deleted then.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.synth_ranks import RankPlan, write_rank_traces
from tests.truth import compare, corpus
from tests.truth import reader as R
from tests.truth.known import KNOWN

STRAGGLER = RankPlan(world=4, steps=3, units=4, late_rank=2, late_ns=5_000_000)
# A folder of real captures kept outside git (fetched data is never committed): its INDEX.md says what each
# is and where it comes from. Its cases run when TRUTH_CORPUS names it.
CORPUS = Path(os.environ["TRUTH_CORPUS"]) if os.environ.get("TRUTH_CORPUS") else None


def case_runs(root: Path | None, prefix: str) -> dict[str, list[Path]]:
    """Case id -> the run's files, for every Kineto run under root (corpus.group_runs); none when absent."""
    if root is None or not root.is_dir():
        return {}
    return {f"{prefix}/{run[0].relative_to(root)}": run for run in corpus.group_runs(corpus.kineto_files(root))}


SHARED_RUNS = case_runs(corpus.SHARED, "shared")
FIXTURE_RUNS = {k: v for k, v in case_runs(corpus.FIXTURES, "fixture").items() if "/neuron/" not in k}
CORPUS_RUNS = case_runs(CORPUS, "corpus")
# Two ranks of one HTA capture kept in two folders of ../shared/traces (NCCL, 2 ranks, ProfilerStep#551..).
_HTA = corpus.SHARED / "HolisticTraceAnalysis/tests/data"
_PAIR = [_HTA / "timeline_analysis/sampled_rank-0.json.gz", _HTA / "trace_filter/sampled_rank-1.json.gz"]
if all(p.is_file() for p in _PAIR):
    SHARED_RUNS["shared-pair/hta-sampled-rank-0+1"] = _PAIR


def _case(case_id: str, check: str, marks: tuple[Any, ...] = ()) -> Any:
    reason = KNOWN.get((case_id, check))
    xfail = (pytest.mark.xfail(strict=True, reason=reason),) if reason else ()
    return pytest.param(case_id, check, marks=(*marks, *xfail), id=f"{case_id}::{check}")


def _cases(ids: list[str], marks: tuple[Any, ...] = ()) -> list[Any]:
    return [_case(i, c, marks) for i in ids for c in compare.CHECKS]


class Runs:
    """The current case's reading and ingested run, made once for its checks (ingest is the slow part; a case's
    checks run one after another). Only the last case is kept: a big trace's parsed events are heavy."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made: dict[str, tuple[list[R.RankTrace], compare.Product]] = {}
        self.count = 0

    def get(self, case_id: str, files: Callable[[], list[Path]]) -> tuple[list[R.RankTrace], compare.Product]:
        if case_id not in self.made:
            paths = files()
            self.count += 1
            self.made = {case_id: (R.load_run(paths), compare.ingest(paths, self.folder / str(self.count)))}
        return self.made[case_id]


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(tmp_path_factory.mktemp("truth"))


def assert_check(name: str, reading: tuple[list[R.RankTrace], compare.Product]) -> None:
    check = compare.run_check(name, *reading)
    assert check.ok, compare.describe(check, limit=5)


@pytest.mark.parametrize(("case_id", "check"), _cases(list(FIXTURE_RUNS)))
def test_fixture(case_id: str, check: str, runs: Runs) -> None:
    assert_check(check, runs.get(case_id, lambda: FIXTURE_RUNS[case_id]))


@pytest.mark.parametrize(("case_id", "check"), _cases(["synth/straggler-4rank"]))
def test_constructed_ranks(case_id: str, check: str, runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> None:
    """bench/synth_ranks.py: 4 NCCL ranks, rank 2 5 ms late to every all-reduce."""
    assert_check(check, runs.get(case_id, lambda: write_rank_traces(tmp_path_factory.mktemp("synth"), STRAGGLER)))


@pytest.mark.slow
@pytest.mark.parametrize(("case_id", "check"), _cases(["gloo/2rank"]))
def test_gloo_capture(case_id: str, check: str, runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A real torch.distributed gloo run, 2 processes on 127.0.0.1, rank 1 late to every all_reduce."""
    pytest.importorskip("torch.distributed")
    from tests.ranks.conftest import make_gloo_capture

    assert_check(check, runs.get(case_id, lambda: make_gloo_capture(tmp_path_factory.mktemp("gloo"))))


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize(("case_id", "check"), _cases(list(SHARED_RUNS)) or [pytest.param("", "", id="no-shared")])
def test_shared(case_id: str, check: str, runs: Runs) -> None:
    if not case_id:
        pytest.skip("../shared/traces is absent")
    assert_check(check, runs.get(case_id, lambda: SHARED_RUNS[case_id]))


@pytest.mark.slow
@pytest.mark.parametrize(("case_id", "check"), _cases(list(CORPUS_RUNS)) or [pytest.param("", "", id="no-corpus")])
def test_corpus(case_id: str, check: str, runs: Runs) -> None:
    if not case_id:
        pytest.skip("TRUTH_CORPUS names no folder of traces")
    assert_check(check, runs.get(case_id, lambda: CORPUS_RUNS[case_id]))


def test_reader_markers_table_names_its_sources() -> None:
    """The reader's marker table says where each bookkeeping event comes from."""
    assert all(src for src in {**R.MARKERS, **R.MARKER_PATTERNS}.values())
    assert R.is_marker({"name": "Record Window End", "ph": "i"})
    assert R.is_marker({"name": "PyTorch Profiler (3)", "ph": "X", "cat": "Trace"})
    assert not R.is_marker({"name": "aten::mm", "ph": "X", "cat": "cpu_op"})


def test_reader_time_is_exact() -> None:
    """µs text -> ns without a binary float: 0.1 + 0.2 µs is 300 ns, and 7 decimals round half up."""
    assert R.ns(R.Decimal("0.1")) + R.ns(R.Decimal("0.2")) == 300
    assert R.ns(R.Decimal("1695835542481129.0005")) == 1695835542481129001
    assert R.ns(12) == 12_000


def _x(cat: str, name: str, ts: int, dur: int, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def test_reader_definitions(tmp_path: Path) -> None:
    """The reader's rules on a hand-made trace: overlapping kernels on one stream unite, a launch goes to the
    innermost cpu_op around it, a launch with no op or frame is its own row, markers stay out of the span."""
    import json

    events = [
        _x("cpu_op", "aten::outer", 100, 50),
        _x("cpu_op", "aten::inner", 110, 10),
        _x("cuda_runtime", "cudaLaunchKernel", 112, 2, correlation=1),
        _x("cuda_driver", "cuLaunchKernelEx", 130, 2, tid=2, correlation=2),
        _x("kernel", "gemm", 200, 10, tid=7, pid=0, correlation=1),
        _x("kernel", "flash_fwd", 205, 10, tid=7, pid=0, correlation=2),
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 900},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": []}))
    rs = R.load_run([path])
    assert R.span(rs) == (100_000, 215_000)
    assert R.device_busy(rs) == {(0, "0"): 15_000}
    assert R.device_total(rs) == 20_000
    assert R.device_time_by_op(rs) == {"aten::inner": 10_000, "cuLaunchKernelEx": 10_000}


def test_reader_is_independent() -> None:
    """The reader imports neither the product (`explorer`) nor the server (`api`): its numbers are its own."""
    import ast

    tree = ast.parse(Path(R.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in names if m.split(".")[0] in ("explorer", "api", "tests")], names
