"""`ingest DIR` and `serve DIR` group a folder of traces into runs as `serve --watch` does: the traces of one step
in one folder together, unrelated captures apart, and say what they grouped (issue 36)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from api.cli import main, open_paths
from explorer.runs.watch import plan_runs
from explorer.store.runs import RunStore
from tests.runs.test_watch import kineto


def write(path: Path, trace: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace))
    return path


def two_captures_and_two_ranks(root: Path) -> dict[str, list[Path]]:
    """Two unrelated single-process captures (different folders, an hour apart) and one 2-rank step."""
    return {
        "before": [write(root / "before" / "trace.json", kineto(3, 4, base_us=1_000_000))],
        "after": [write(root / "after" / "trace.json", kineto(3, 2, base_us=3_601_000_000))],
        "ddp": [write(root / "ddp" / f"rank{r}.json", kineto(7, 3, rank=r)) for r in (0, 1)],
    }


def runs_of(data: Path) -> dict[str, list[str]]:
    """Each run's name -> the names of the files it holds, read from the catalog."""
    records, _ = RunStore(data).catalog.list(limit=100)
    return {r.name: sorted(a.name for a in r.summary.artifacts) for r in records}


def test_a_folder_of_unrelated_captures_becomes_one_run_each(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    files = two_captures_and_two_ranks(root)
    data = tmp_path / "data"
    result = CliRunner().invoke(main, ["ingest", str(root), "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    assert f"{root} holds 3 unrelated captures: ingesting them as 3 runs" in result.stderr
    assert "- logs/ddp step 7 (2 ranks): rank0.json, rank1.json" in result.stderr
    ids = result.stdout.split()
    assert len(ids) == 3 and len(set(ids)) == 3
    runs = runs_of(data)
    assert runs == {"logs/after/trace step 3": ["trace.json"], "logs/before/trace step 3": ["trace.json"],
                    "logs/ddp step 7 (2 ranks)": ["rank0.json", "rank1.json"]}
    # each run holds only its own capture: the span is one capture's, not the hour between them
    records, _ = RunStore(data).catalog.list(limit=100)
    spans = {r.name: r.summary.span_ns for r in records}
    assert spans["logs/before/trace step 3"] == (10 * 4 + 10) * 1000
    assert len(files["ddp"]) == 2


def test_again_the_same_folder_reuses_every_run(tmp_path: Path) -> None:
    root, data = tmp_path / "logs", tmp_path / "data"
    two_captures_and_two_ranks(root)
    first = CliRunner().invoke(main, ["ingest", str(root), "--data-dir", str(data)])
    again = CliRunner().invoke(main, ["ingest", str(root), "--data-dir", str(data)])
    assert again.exit_code == 0
    assert again.stdout.split() == first.stdout.split()
    assert again.stderr.count("already ingested: run") == 3


def test_one_run_flag_and_a_name_prefix(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    two_captures_and_two_ranks(root)
    one = CliRunner().invoke(main, ["ingest", str(root), "--one-run", "--data-dir", str(tmp_path / "one")])
    assert one.exit_code == 0 and len(one.stdout.split()) == 1
    assert list(runs_of(tmp_path / "one").values()) == [
        ["logs/after/trace.json", "logs/before/trace.json", "logs/ddp/rank0.json", "logs/ddp/rank1.json"]]
    named = CliRunner().invoke(main, ["ingest", str(root), "--name", "exp1", "--data-dir", str(tmp_path / "named")])
    assert sorted(runs_of(tmp_path / "named")) == ["exp1 (logs/after/trace step 3)", "exp1 (logs/before/trace step 3)",
                                                   "exp1 (logs/ddp step 7 (2 ranks))"]
    assert named.exit_code == 0


def test_what_belongs_together_stays_one_run(tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"  # ranks of one step, and rank files without any step
    for r in (0, 1):
        write(ranks / f"rank{r}.json", kineto(5, 2, rank=r))
    assert plan_runs([ranks]) is None
    nostep = tmp_path / "nostep"
    for r in (0, 1):
        write(nostep / f"r{r}.json", {"traceEvents": kineto(5, 2)["traceEvents"][1:],  # type: ignore[index]
                                      "distributedInfo": {"rank": r, "world_size": 2}})
    assert plan_runs([nostep]) is None
    bundle = tmp_path / "bundle"  # anything but trace JSON beside the traces: a bundle, one run as given
    write(bundle / "a" / "trace.json", kineto(1, 2))
    write(bundle / "b" / "trace.json", kineto(2, 2))
    (bundle / "model.neff").write_bytes(b"\x00" * 64)
    assert plan_runs([bundle]) is None
    et = tmp_path / "et"  # an execution trace belongs with the Kineto trace beside it
    write(et / "a" / "trace.json", kineto(1, 2))
    write(et / "b" / "trace.json", kineto(2, 2))
    write(et / "b" / "et.json", {"schema": "1.0.1", "pid": 1, "nodes": []})
    assert plan_runs([et]) is None
    assert plan_runs([et / "a" / "trace.json"]) is None  # a file, or several paths: one run as given
    assert plan_runs([et / "a", et / "b"]) is None


def test_serve_folder_opens_one_run_per_capture(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    two_captures_and_two_ranks(root)
    store = RunStore(tmp_path / "data")
    opened = open_paths(store, [root])
    assert sorted(r.name for r in opened) == ["logs/after/trace step 3", "logs/before/trace step 3",
                                              "logs/ddp step 7 (2 ranks)"]
    assert [r.id for r in open_paths(store, [root])] == [r.id for r in opened]  # reused, not ingested again
