"""The truth harness's corpus: which files are Kineto traces, how files group into runs (a folder of one
run's rank files is one run), and where the corpora are (../shared/traces, tests/fixtures)."""

from __future__ import annotations

import gzip
import json
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "traces"
FIXTURES = ROOT / "tests" / "fixtures"
SNIFF_BYTES = 1 << 21
KINETO_KEYS = (b'"deviceProperties"', b'"distributedInfo"', b'"schemaVersion"', b'"computeProperties"',
               b'"cat": "cpu_op"', b'"cat":"cpu_op"', b'"cat": "Operator"', b'"cat": "kernel"', b'"cat": "Kernel"')
SUFFIXES = (".json", ".json.gz", ".gz", ".zip")


def head(path: Path) -> bytes:
    """The first SNIFF_BYTES of the file's JSON text (gzip and zip opened)."""
    with path.open("rb") as f:
        magic = f.read(4)
    if magic[:2] == b"\x1f\x8b":
        with gzip.open(path, "rb") as g:
            return g.read(SNIFF_BYTES)
    if magic == b"PK\x03\x04":
        with zipfile.ZipFile(path) as z, z.open(z.namelist()[0]) as member:
            return member.read(SNIFF_BYTES)
    with path.open("rb") as f:
        return f.read(SNIFF_BYTES)


def is_kineto_file(path: Path) -> bool:
    """A Kineto (torch.profiler) JSON trace by its head: a traceEvents object with a Kineto key or category."""
    try:
        text = head(path)
    except (OSError, EOFError, zipfile.BadZipFile, gzip.BadGzipFile):
        return False
    return b'"traceEvents"' in text and any(k in text for k in KINETO_KEYS)


def kineto_files(folder: Path) -> list[Path]:
    """Every Kineto trace under a folder, sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES) and is_kineto_file(p))


def rank_of(path: Path) -> tuple[int, int] | None:
    """(rank, world_size) from the file's distributedInfo, when it has both."""
    try:
        doc = json.loads(head(path)) if path.stat().st_size < SNIFF_BYTES // 2 else None
    except ValueError:
        doc = None
    if doc is None:
        from tests.truth.reader import read_doc  # only big files: the whole document
        doc = read_doc(path)
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and isinstance(info.get("world_size"), int):
        return info["rank"], info["world_size"]
    return None


def group_runs(files: list[Path]) -> list[list[Path]]:
    """Runs: the files of one folder whose distributedInfo ranks are distinct and number world_size form one
    multi-rank run; every other file is a run of its own."""
    by_dir: dict[Path, list[Path]] = defaultdict(list)
    for f in files:
        by_dir[f.parent].append(f)
    runs: list[list[Path]] = []
    for group in by_dir.values():
        ids = [rank_of(f) for f in group] if len(group) > 1 else [None]
        ranks = {i[0] for i in ids if i}
        if len(group) > 1 and all(ids) and len(ranks) == len(group) == ids[0][1]:  # type: ignore[index]
            runs.append(sorted(group))
        else:
            runs.extend([f] for f in sorted(group))
    return runs
