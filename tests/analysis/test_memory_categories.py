"""Memory by category from export_memory_timeline: torch's own two forms of one real CPU profile (the raw changes
and its coalesced sizes by category) must tell the same peak; the public raw file against a plain replay."""

from __future__ import annotations

import gzip
import json
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

from explorer.ingest.detect import Format, detect_format
from explorer.ingest.memory_timeline import CATEGORIES
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from explorer.views.memory import compute_run_memory


def categories(store: RunStore, path: Path) -> dict[str, object]:
    data = compute_run_memory(store, ingest_paths(store, [path]).id)["categories"]
    assert data is not None
    return dict(data)


def replay_raw(events: list[list[int]]) -> tuple[int, dict[str, int]]:
    """(the peak of the total over distinct times, bytes per category at it), replaying in time order with the
    held-before-the-profile (-1) changes first."""
    first = min(e[0] for e in events if e[0] >= 0)
    order = sorted(range(len(events)), key=lambda i: (events[i][0] if events[i][0] >= 0 else first, i))
    held: dict[str, int] = defaultdict(int)
    best, best_held = -1, {}
    for k, i in enumerate(order):
        t, _, nbytes, cat = events[i]
        held[CATEGORIES[cat]] += nbytes
        nxt = order[k + 1] if k + 1 < len(order) else None
        now = t if t >= 0 else first
        if (nxt is None or max(events[nxt][0], first) != now) and sum(held.values()) > best:
            best, best_held = sum(held.values()), {c: v for c, v in held.items() if v}
    return best, best_held


def test_public_raw_file_against_a_plain_replay(store: RunStore, shared_traces: Path) -> None:
    path = shared_traces / "HolisticTraceAnalysis/tests/data/memory_analysis/memory_timeline.raw.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))
    assert detect_format(gzip.decompress(path.read_bytes())) is Format.MEMORY_TIMELINE
    got = categories(store, path)
    peak, by_cat = replay_raw(events)
    assert got["peak_bytes"] == peak
    assert {r["category"]: r["bytes"] for r in got["peak_by_category"]} == by_cat  # type: ignore[attr-defined]
    assert got["changes"] == len(events)


def test_coalesced_fixture(store: RunStore, tmp_path: Path) -> None:
    sizes = [[0, 100, 0, 0, 0, 0, 0, 0, 0], [0, 100, 0, 0, 0, 50, 0, 0, 0], [0, 100, 0, 0, 0, 20, 60, 0, 0]]
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps([[-1, 10, 20], sizes]))
    got = categories(store, path)
    assert (got["peak_bytes"], got["peak_ns"]) == (180, 10_000)  # 20 µs, from the first timed change (10 µs)
    assert got["peak_by_category"] == [{"category": "parameter", "bytes": 100}, {"category": "gradient", "bytes": 60},
                                       {"category": "activation", "bytes": 20}]
    assert got["total"] == [150, 180] and got["ts_ns"] == [0, 10_000]  # (held before: there at the first time)


def test_torch_raw_and_coalesced_forms_agree(store: RunStore, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(64, 128)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for _ in range(2):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    with warnings.catch_warnings():  # (deprecated in favour of CUDA snapshots; still the only CPU categories)
        warnings.simplefilter("ignore", FutureWarning)
        prof.export_memory_timeline(str(tmp_path / "t.raw.json"), device="cpu")
        prof.export_memory_timeline(str(tmp_path / "t.json"), device="cpu")
    times, sizes = json.loads((tmp_path / "t.json").read_text())
    want = max(sum(row) for row in sizes)
    raw = categories(store, tmp_path / "t.raw.json")
    coalesced = categories(store, tmp_path / "t.json")
    assert raw["peak_bytes"] == coalesced["peak_bytes"] == want
    assert {"parameter", "optimizer_state", "gradient"} <= set(raw["categories"])  # type: ignore[arg-type]
