"""bench/ingest.py's real-trace rows (--real): the medians, the RSS split and the printed arithmetic, then one
real fresh-process ingest through them. The full benchmark is run by hand (docs/benchmarks.md, "Ingest")."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers.support import bench_module

MIB = 2**20


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return bench_module("ingest")


def test_real_rows_take_each_figure_s_median_and_remove_each_round_s_data(bench: ModuleType,
                                                                          tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_bytes(b"x" * 1000)
    # per round: seconds, peak, before, of which files; each column's median is another round's
    rounds = [(0.5, 300 * MIB, 150 * MIB, 80 * MIB), (0.25, 310 * MIB, 140 * MIB, 90 * MIB),
              (0.75, 290 * MIB, 160 * MIB, 85 * MIB)]
    seen: list[Path] = []

    def ingest(path: Path, data: Path) -> dict[str, Any]:
        assert path == trace and not data.exists()
        data.mkdir()
        (data / "run.parquet").write_bytes(b"p")
        seen.append(data)
        return dict(zip(bench.REAL_FIGURES, rounds[len(seen) - 1], strict=True))

    [row] = bench.real_rows([trace], tmp_path, 3, ingest)
    assert len(set(seen)) == 3 and not any(d.exists() for d in seen)
    assert row == bench.RealRow("t.json", 1000, 0.5, 300 * MIB, 150 * MIB, 85 * MIB)
    assert row.share_bytes == 150 * MIB


def test_a_failed_round_still_removes_its_data(bench: ModuleType, tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_bytes(b"{}")

    def ingest(path: Path, data: Path) -> dict[str, Any]:
        data.mkdir()
        raise SystemExit("the ingest of t.json failed")

    with pytest.raises(SystemExit):
        list(bench.real_rows([trace], tmp_path, 2, ingest))
    assert not list(tmp_path.glob("data_*"))


def test_real_line_arithmetic(bench: ModuleType) -> None:
    row = bench.RealRow("mtia_rank_0.json", 86_940_133, 0.37, 188 * MIB, 111 * MIB, 80 * MIB)
    cells = bench.real_line(row).split()
    size = Decimal(86_940_133)
    assert cells[0] == "mtia_rank_0.json"
    assert cells[1] == str((size / 10**6).quantize(Decimal("0.1"))) == "86.9"
    assert cells[3] == str((size / 10**6 / Decimal("0.37")).quantize(Decimal(1))) == "235"  # MB/s
    assert cells[4:6] == ["188", "MiB"]
    assert cells[6] == f"{(188 * MIB / size).quantize(Decimal('0.01'))}x" == "2.27x"
    assert cells[7:11] == ["111", "MiB", "80", "MiB"]
    assert cells[11:13] == ["77", "MiB"]  # the ingest's share: the peak less the process before it
    assert cells[13] == f"{(77 * MIB / size).quantize(Decimal('0.01'))}x" == "0.93x"


def test_one_real_ingest_in_a_fresh_process(bench: ModuleType, tmp_path: Path) -> None:
    """The child's own figures, read from its process: the RSS before the ingest is within its peak, the mapped
    files' pages within that, and the run it stored holds the trace's slices."""
    trace = tmp_path / "small.json"
    bench_module("synth").write_kineto_trace(trace, 2000)
    slices = sum(1 for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X")

    result = bench.ingest_child(trace, tmp_path / "data")
    assert result["slices"] == slices
    assert 0 < result["rss_file_before_bytes"] < result["rss_before_bytes"] <= result["peak_rss_bytes"]
    assert 0 < result["seconds"] < 60
    by_mapping = dict(result["rss_map_before"])
    # the smaps reading accounts for the whole RSS read from status at the same moment (within the pages the
    # reading itself touched), and it names what the process maps: the interpreter and pyarrow's library
    assert abs(sum(by_mapping.values()) - result["rss_before_bytes"]) < 4 * MIB
    assert any(name.startswith("libarrow.so") for name in by_mapping)
    assert "[heap]" in by_mapping

    [row] = bench.real_rows([trace], tmp_path, 1)
    assert row.trace == "small.json" and row.size_bytes == trace.stat().st_size
    assert 0 < row.rss_file_before_bytes < row.rss_before_bytes <= row.peak_rss_bytes
    assert not (tmp_path / "data_small_0").exists()
    assert [name for name, _ in row.rss_map_before] == [name for name, _ in sorted(
        row.rss_map_before, key=lambda kv: -kv[1])]  # largest first


def test_mapping_lines_show_the_largest_then_the_rest_together(bench: ModuleType) -> None:
    sizes = [("libarrow.so.2600", 30 * MIB), ("[anonymous]", 28 * MIB), ("[heap]", 17 * MIB),
             ("libc.so.6", MIB), ("libm.so.6", MIB // 2)]
    row = bench.RealRow("t.json", 1, 1.0, 100 * MIB, 77 * MIB, 32 * MIB, tuple(sizes))
    assert bench.mapping_lines(row, top=3) == ["    30.0 MiB  libarrow.so.2600", "    28.0 MiB  [anonymous]",
                                               "    17.0 MiB  [heap]", "     1.5 MiB  2 others"]
    assert len(bench.mapping_lines(row)) == 5


def test_the_whole_process_side_runs_the_console_command(bench: ModuleType, tmp_path: Path) -> None:
    """The side a user waits for: `trace-explorer ingest` as a process, its data folder removed after the round,
    and never faster than the in-process ingest it contains."""
    trace = tmp_path / "small.json"
    bench_module("synth").write_kineto_trace(trace, 2000)
    whole = bench.process_loader(tmp_path)(trace, 0)
    inside = bench.ingest_child(trace, tmp_path / "inside")["seconds"]
    assert inside < whole < 120
    assert not (tmp_path / "process_small_0").exists()
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    with pytest.raises(SystemExit, match="trace-explorer ingest broken.json failed"):
        bench.process_loader(tmp_path)(broken, 0)
