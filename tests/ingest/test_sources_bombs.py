"""Decompression bombs end early with a clear error: bounded by a ratio and by evident emptiness, not only
by the 8 GiB absolute limit (a 2 MB gzip of 2 GiB of whitespace used to cost 2.1 GB of RSS)."""

from __future__ import annotations

import gzip
import io
import json
import resource
import zipfile
import zlib
from pathlib import Path

import pytest

from explorer.errors import BadTrace
from explorer.ingest.sources import BOMB_CHECK_BYTES, MAX_RATIO, collect_inputs


def gzip_of(chunks: int, chunk: bytes) -> bytes:
    """A gzip of chunks x chunk, compressed as it goes (the bomb is never held decompressed)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as gz:
        for _ in range(chunks):
            gz.write(chunk)
    return out.getvalue()


def scratch(tmp_path: Path) -> Path:
    folder = tmp_path / "scratch"
    folder.mkdir(exist_ok=True)
    return folder


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_whitespace_bomb_is_refused_once_evident(tmp_path: Path) -> None:
    bomb = tmp_path / "blank.json.gz"
    bomb.write_bytes(gzip_of(80, b" " * 2**20))  # 80 MiB of spaces in ~80 kB
    before = peak_rss_mb()
    with pytest.raises(BadTrace, match="all whitespace") as err:
        collect_inputs([bomb], scratch_root=scratch(tmp_path))
    assert "blank.json.gz" in str(err.value)
    assert peak_rss_mb() - before < 200  # streamed, never held: the refusal comes after ~64 MiB
    assert list((tmp_path / "scratch").iterdir()) == []  # nothing left behind


def test_ratio_bomb_with_a_valid_json_start_is_refused(tmp_path: Path) -> None:
    head = b'{"traceEvents": [' + b'{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},' * 10
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(head + b"0" * (BOMB_CHECK_BYTES * 3 // 2)))
    ratio = (len(head) + BOMB_CHECK_BYTES * 3 // 2) / len(bomb.read_bytes())
    assert ratio > MAX_RATIO
    with pytest.raises(BadTrace, match="decompression bomb"):
        collect_inputs([bomb], scratch_root=scratch(tmp_path))


def test_zip_member_bomb_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "capture.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf, \
            zf.open("trace.json", "w", force_zip64=True) as member:
        member.write(b"[")
        for _ in range(BOMB_CHECK_BYTES * 2 // 2**20):
            member.write(b"\n" * 2**20)
    with pytest.raises(BadTrace, match="decompression bomb|all whitespace"):
        collect_inputs([archive], scratch_root=scratch(tmp_path))


def test_an_ordinary_trace_compressing_well_is_still_read(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": i, "dur": 1}
              for i in range(300_000)]
    data = json.dumps({"traceEvents": events}).encode()
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(data))
    assert len(data) > BOMB_CHECK_BYTES / 4 and len(data) / len(path.read_bytes()) < MAX_RATIO
    inputs = collect_inputs([path], scratch_root=scratch(tmp_path))
    try:
        assert [m.path.read_bytes() if m.path else m.data for m in inputs.members] == [data]
    finally:
        inputs.cleanup()


@pytest.mark.shared
def test_ratio_rule_is_below_real_compression(shared_traces: Path) -> None:
    """The bomb ratio leaves room over the real traces' own compression ratios."""
    ratios = []
    for path in sorted(shared_traces.rglob("*.gz")):
        raw = path.read_bytes()
        ratios.append(len(zlib.decompress(raw, 16 + zlib.MAX_WBITS)) / len(raw))
    assert ratios and max(ratios) * 2 < MAX_RATIO, ratios
