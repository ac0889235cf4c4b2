"""A file that is not a trace is named for what its bytes say it is (never its name), with what to do instead;
an empty folder is named. Each case runs the real command line and asserts the message a user reads."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli import main
from explorer.ingest.detect import Format, detect_format
from explorer.ingest.magic import describe_binary, neff_version


def neff(version: bytes, packaging: int = 1) -> bytes:
    """A NEFF as aws-neuron's NKI compiler (KLR.NEFF.Header) lays it out: a 1,024-byte little-endian header,
    then the gzip payload."""
    header = struct.pack("<QQQQQ", packaging, 1024, 10, 2, 20) + version.ljust(128, b"\x00")
    return header.ljust(1024, b"\x00") + b"\x1f\x8b\x08" + b"\x00" * 7


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200)
CASES = [
    ("png_named_trace", "trace.json", PNG, "a PNG image, not a trace"),
    ("pdf", "trace.json", b"%PDF-1.7\n" + b"x" * 100, "a PDF document"),
    ("elf", "trace.json", b"\x7fELF\x02\x01\x01" + bytes(100), "an ELF executable"),
    ("pickle", "snapshot.json", pickle.dumps({"a": 1}, protocol=4), "pickles are never loaded"),
    ("zstd", "trace.json.zst", b"\x28\xb5\x2f\xfd" + bytes(50), "decompress it first"),
]


@pytest.mark.parametrize(("case", "name", "content", "expected"), CASES, ids=[c[0] for c in CASES])
def test_binary_files_are_named_by_their_bytes(tmp_path: Path, case: str, name: str, content: bytes,
                                               expected: str) -> None:
    assert detect_format(content) is Format.BINARY
    path = tmp_path / name
    path.write_bytes(content)
    result = CliRunner().invoke(main, ["ingest", str(path), "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output, result.output
    assert "undocumented Neuron binary" not in result.output


def test_a_lone_neff_is_kept_as_an_artifact_not_a_failure(tmp_path: Path) -> None:
    """Neuron binaries alone make a ready run holding them (issue 41: never a failed row), the NEFF's header
    version and the convert commands in its summary."""
    for name, content in (("model.neff", neff(b"2.19.5000.0+abc")), ("graph.bin", neff(b"", packaging=2))):
        assert detect_format(content) is Format.BINARY
        path = tmp_path / name
        path.write_bytes(content)
        result = CliRunner().invoke(main, ["ingest", str(path), "--data-dir", str(tmp_path / "data")])
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output


def test_neff_message_gives_the_converter_commands() -> None:
    text = describe_binary(neff(b"2.20.1"), "model.neff")
    assert "neuron-explorer view -n FILE.neff -s FILE.ntff --output-format parquet" in text
    assert "neuron-profile view" in text and "2.20.1" in text


def test_neff_header_is_checked_not_guessed() -> None:
    assert neff_version(neff(b"1.2")) == "1.2"
    assert neff_version(neff(b"1.2")[:1000]) is None  # shorter than its header
    bad = bytearray(neff(b"1.2"))
    bad[8:16] = struct.pack("<Q", 512)  # header size must be 1024
    assert neff_version(bytes(bad)) is None
    assert neff_version(b"{" + b" " * 2000) is None


def test_ntff_without_a_header_says_the_name_is_the_only_clue() -> None:
    text = describe_binary(bytes(range(256)) * 8, "profile.ntff")
    assert "named like a Neuron profile" in text and "neuron-explorer view" in text
    assert describe_binary(bytes(range(256)) * 8, "blob.bin") == "a binary file of no known trace format"


def test_an_empty_folder_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "capture"
    empty.mkdir()
    result = CliRunner().invoke(main, ["ingest", str(empty), "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2
    assert f"{empty}: the folder has no files" in result.output, result.output
