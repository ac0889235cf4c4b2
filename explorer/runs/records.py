"""A run's identity before it is parsed: its default name, its content hash, and the ready run that already holds
the same files (the one dedupe rule of the CLI, the notebook, the upload route and the watcher)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from explorer.ingest.sources import sha256_file
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore


def default_run_name(paths: list[Path], fallback: str = "run") -> str:
    """A run's name when none is given (CLI, notebook, upload): the first file's name without its trace and
    archive suffixes, and how many files more."""
    first = paths[0].name if paths else fallback
    for suffix in (".gz", ".json", ".zip", ".tar", ".tgz"):
        first = first.removesuffix(suffix)
    return first + (f" (+{len(paths) - 1})" if len(paths) > 1 else "")


def combined_sha256(shas: list[str]) -> str:
    """One hash over several files' sha256s, whatever their order (an upload streams them in any order)."""
    return hashlib.sha256("\n".join(sorted(shas)).encode()).hexdigest()


def input_files(paths: list[Path]) -> list[Path]:
    """Every file an ingest of `paths` reads, folders walked as collect_inputs walks them (links not followed)."""
    out: list[Path] = []
    for path in paths:
        out += sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.is_dir() else [path]
    return out


def content_sha256(paths: list[Path]) -> str:
    """The sha256 an ingest of `paths` stores (combined over every file): equal content finds the existing run
    (catalog.find_by_sha) without parsing anything."""
    return combined_sha256([sha256_file(f) for f in input_files(paths)])


def find_identical(store: RunStore, paths: list[Path]) -> RunRecord | None:
    """The ready run holding exactly these files, or None. The files are hashed only when a ready run's files
    have the same sizes: a new trace (the common case) is not read twice, once here and once by its ingest."""
    sizes = sorted(f.stat().st_size for f in input_files(paths))
    records, _ = store.catalog.list(status="ready", limit=100_000)
    if not any(sorted(a.size for a in r.summary.artifacts) == sizes for r in records):
        return None
    existing = store.catalog.find_by_sha(content_sha256(paths))
    return existing if existing is not None and existing.status == "ready" else None
