"""The fuzz corpus (tests/fuzz/corpus.py) through the real ingest, JSON on both Chrome parser paths: every
input ends as a run or a clear one-line error naming the file, within the time and memory bounds, leaving
nothing behind, and the same on both paths; the ingest guard never fires (a guard hit is a parser bug).
Figures in the terminal summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.corpus import SHARED_TRACES, build_corpus, corpus_digest
from tests.fuzz.runner import RSS_BOUND_MB, TIME_BOUND_S, disagreements, figures, format_figures, run_corpus

pytestmark = pytest.mark.slow

# seeded from the real traces of ../shared/traces: 1,022 inputs; from tests/fixtures where that folder is absent
# (a checkout elsewhere than beside it): 592
MIN_INPUTS = 1000 if SHARED_TRACES.is_dir() else 500


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, fuzz_report: Any) -> Any:
    corpus = build_corpus()
    outs = run_corpus(corpus, tmp_path_factory.mktemp("fuzz"))
    fig = figures(outs)
    fig["corpus"] = {"digest": corpus_digest(corpus)[:12], "seeds_from": str(SHARED_TRACES)
                     if SHARED_TRACES.is_dir() else "tests/fixtures"}
    fuzz_report("corpus", format_figures(fig), fig)
    return outs, fig


def test_corpus_is_deterministic_and_big_enough() -> None:
    a, b = build_corpus(), build_corpus()
    assert corpus_digest(a) == corpus_digest(b)
    assert len(a) >= MIN_INPUTS
    assert len({f.name for f in a}) == len(a)
    kinds = {f.kind for f in a}
    assert {"truncate", "byte_flip", "bracket", "type_swap", "extreme_number", "structure", "encoding",
            "archive", "archive_bomb", "long_string", "many_tids", "parquet_drop_column", "parquet_wrong_type",
            "parquet_empty_table"} <= kinds


def test_every_input_ends_in_a_run_or_a_clear_error(outcomes: Any) -> None:
    outs, fig = outcomes
    assert fig["inputs"] >= MIN_INPUTS
    assert [f"{o.outcome} {o.name} ({o.path}): {o.message}" for o in outs if o.finding] == []
    classes = fig["classes"]
    assert classes.get("ok", 0) > 100 and classes.get("error:bad_trace", 0) > 100  # both ends are exercised


def test_every_parser_path_saw_every_json_input(outcomes: Any) -> None:
    outs, _fig = outcomes
    paths: dict[str, set[str]] = {}
    for o in outs:
        paths.setdefault(o.name, set()).add(o.path)
    json_names = {f.name for f in build_corpus() if f.json}
    assert {n for n in json_names if paths.get(n) != {"msgspec", "native", "duckdb"}} == set()


def test_the_parser_paths_agree(outcomes: Any) -> None:
    """The msgspec path, the compiled reader and DuckDB's end every JSON input alike, down to the error's
    words: DuckDB's reader alone would take NaN, Infinity, trailing commas, over-deep args and `true` as a
    time; the compiled reader refuses what it does not read as the msgspec path does."""
    outs, _fig = outcomes
    assert disagreements(outs) == []


def test_disagreements_are_seen() -> None:
    """The comparison above can fail: a different outcome, or the same error worded otherwise, is one."""
    from tests.fuzz.runner import Outcome

    def outcome(path: str, result: str, message: str = "") -> Outcome:
        return Outcome("in/1", "kind", path, result, 0.0, 0.0, 1, message)

    assert disagreements([outcome("msgspec", "ok"), outcome("duckdb", "ok")]) == []
    assert len(disagreements([outcome("msgspec", "error:bad_trace", "t.json: x"), outcome("duckdb", "ok")])) == 1
    assert len(disagreements([outcome("msgspec", "error:bad_trace", "t.json: x"),
                              outcome("duckdb", "error:bad_trace", "t.json: y")])) == 1
    assert disagreements([outcome("msgspec", "ok"), outcome("duckdb", "timeout")]) == []  # a finding, not this
    assert len(disagreements([outcome("msgspec", "ok"), outcome("duckdb", "ok"), outcome("native", "error:bad_trace",
                                                                                          "t.json: x")])) == 1


def test_time_and_memory_bounds(outcomes: Any) -> None:
    outs, fig = outcomes
    assert fig["slowest"]["seconds"] < TIME_BOUND_S
    assert fig["largest_rss_mb"]["rss_mb"] < RSS_BOUND_MB


def test_a_guard_hit_is_a_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parser bug must not hide behind the guard: the runner classifies it as `guard`, with the traceback."""
    import logging

    from explorer.ingest import pipeline
    from explorer.store.runs import RunStore
    from tests.fuzz import runner
    from tests.fuzz.corpus import FuzzInput

    def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise RuntimeError("probe")

    monkeypatch.setattr(pipeline, "parse_chrome_file", broken)
    from explorer.ingest.chrome import fast as chrome_fast
    from explorer.ingest.chrome import kscan

    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", chrome_fast.FAST_MIN_BYTES)  # undone after the test
    monkeypatch.setattr(kscan, "_LIB", kscan._LIB)  # _ingest_one sets it: undone after the test too
    item = FuzzInput("guard/probe/0", "probe", {"trace.json": b'{"traceEvents": []}'}, True)
    target = item.write(tmp_path / "in")
    service_log = logging.getLogger("explorer.runs.ingest")
    service_log.addHandler(runner._BUGS)
    try:
        outcome, message = runner._ingest_one(RunStore(tmp_path / "data"), item, target, "msgspec")
    finally:
        service_log.removeHandler(runner._BUGS)
    assert outcome == "guard"
    assert "trace.json: internal error while reading (RuntimeError: probe)" in message
    assert "Traceback" in message and "broken" in message
