"""The truth harness on any traces: `python bench/truth.py PATH...` reads each Kineto trace (files, or
folders searched for them; a folder's rank files of one run together) with the independent reader
(tests/truth/reader.py) and with the product, and prints one row per run and number: agree or not, and
how they differ. `--together` takes the files given as the ranks of one run; `--json OUT` writes the rows
as JSON. Exit status 1 when any number disagrees.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.truth import compare, corpus  # noqa: E402


def runs_of(paths: list[Path]) -> list[list[Path]]:
    """The runs named by the arguments: a file is a run; a folder's Kineto traces grouped (corpus.group_runs)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(corpus.kineto_files(p))
        elif p.is_file():
            files.append(p)
        else:
            raise SystemExit(f"no such file or folder: {p}")
    return corpus.group_runs(files)


def run_one(run: list[Path], data: Path) -> list[dict[str, object]]:
    """Every check of one run as rows (an ingest failure is one row)."""
    try:
        checks = compare.compare(run, data)
    except Exception as exc:  # noqa: BLE001 - a bad trace is a row of the table, not the end of the table
        return [{"check": "ingest", "ok": False, "detail": f"{type(exc).__name__}: {exc}"[:300]}]
    return [{"check": c.name, "ok": c.ok, "detail": "" if c.ok else compare.describe(c)} for c in checks]


def label(run: list[Path], roots: list[Path]) -> str:
    first = run[0]
    for root in roots:
        if root.is_dir() and first.is_relative_to(root):
            first = first.relative_to(root)
            break
    return f"{first} (+{len(run) - 1} ranks)" if len(run) > 1 else str(first)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument("--wide", action="store_true", help="no cut in the detail column")
    ap.add_argument("--together", action="store_true", help="the files given are the ranks of one run")
    args = ap.parse_args(argv)
    results = []
    runs = [sorted(args.paths)] if args.together else runs_of(args.paths)
    with tempfile.TemporaryDirectory(prefix="truth-") as tmp:
        for i, run in enumerate(runs):
            t0 = time.monotonic()
            rows = run_one(run, Path(tmp) / str(i))
            name = label(run, args.paths)
            results.append({"run": name, "files": [str(p) for p in run], "seconds": round(time.monotonic() - t0, 1),
                            "checks": rows})
            agree = sum(bool(r["ok"]) for r in rows)
            print(f"{name}  [{agree}/{len(rows)} agree, {results[-1]['seconds']} s]", flush=True)
            for r in rows:
                detail = str(r["detail"]) if args.wide else str(r["detail"])[:160]
                print(f"    {'ok  ' if r['ok'] else 'DIFF'} {r['check']:<22} {detail}", flush=True)
    total = sum(len(r["checks"]) for r in results)
    agree = sum(bool(c["ok"]) for r in results for c in r["checks"])
    print(f"\n{len(results)} runs, {agree}/{total} numbers agree")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if agree == total else 1


if __name__ == "__main__":
    sys.exit(main())
