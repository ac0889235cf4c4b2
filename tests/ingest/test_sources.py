"""The inputs' sha256 (explorer/ingest/sources.py), against hashlib over the whole file read at once."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from explorer.ingest import sources
from explorer.ingest.sources import hash_beside, sha256_file


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 16 * 3 + 5])
def test_the_sha256_of_a_file_read_in_chunks(tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "HASH_CHUNK_BYTES", 16)  # chunk boundaries inside these small files
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(size))
    assert sha256_file(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_sha256_beside_the_parse_is_the_files(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(os.urandom(3 * 2**20 + 7))  # past one chunk of the real size
    assert hash_beside(path).result(timeout=60) == hashlib.sha256(path.read_bytes()).hexdigest()
