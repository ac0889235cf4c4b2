"""Fuzz corpus by hand: the CI corpus (tests/fuzz/test_corpus.py) or a bigger one, through the real ingest
on both Chrome parser paths; prints inputs, classes, the slowest ingest, the largest RSS and every finding.

    PYTHONPATH=. .venv/bin/python bench/fuzz.py                 # every seed and table (~5,000 inputs)
    PYTHONPATH=. .venv/bin/python bench/fuzz.py --seeds 12 --tables 4 --json fuzz.json   # the CI corpus
    PYTHONPATH=. .venv/bin/python bench/fuzz.py --only structure/  # inputs whose name starts so

Exit status 1 when there is a finding (a traceback, a guard hit, a timeout, an unclear error, a leftover) or
when the two parser paths end an input differently.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.fuzz.corpus import SHARED_TRACES, build_corpus, corpus_digest  # noqa: E402
from tests.fuzz.runner import figures, format_figures, run_corpus  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=None, help="Chrome seeds (default: every real trace)")
    ap.add_argument("--tables", type=int, default=None, help="mutated tables per device profile (default: all)")
    ap.add_argument("--shared", type=Path, default=SHARED_TRACES, help="the real traces folder")
    ap.add_argument("--only", default="", help="only inputs whose name starts with this")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    corpus = [f for f in build_corpus(args.shared, args.seeds, args.tables) if f.name.startswith(args.only)]
    print(f"corpus {corpus_digest(corpus)[:12]}: {len(corpus)} inputs, {sum(f.size for f in corpus) / 1e6:.1f} MB, "
          f"built in {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as work:
        outcomes = run_corpus(corpus, Path(work), workers=args.workers)
    fig = figures(outcomes)
    fig["wall_s"] = round(time.perf_counter() - t0, 1)
    print(format_figures(fig))
    print(f"  wall: {fig['wall_s']} s with {args.workers} workers")
    if args.json:
        args.json.write_text(json.dumps(fig, indent=1))
    return 1 if fig["findings"] or fig["paths_disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
