"""A queued run holds no lease: RunStore.recover, given the runs a job queue holds, leaves those (and runs queued
a moment ago, whose job is on its way) alone, and still fails the orphans; without a queue it is as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer.store.runs import RunStore


@pytest.mark.parametrize(("queue", "lease_s", "failed"), [
    (False, 0.0, {"held", "orphan", "young"}),  # no queue: every run without a live lease fails
    (True, 0.0, {"orphan", "young"}),  # the queue holds `held`; nothing counts as young
    (True, 1e9, {"orphan"}),  # `young` is queued and young: its job is on its way; an ingesting orphan is not
])
def test_recover_leaves_the_runs_the_queue_holds(tmp_path: Path, queue: bool, lease_s: float, failed: set[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("explorer.store.runs.LEASE_S", lease_s)
    store = RunStore(tmp_path / "data")
    try:
        ids = {name: store.catalog.create(name).id for name in ("held", "orphan", "young")}
        store.catalog.update(ids["orphan"], status="ingesting")
        shared = store.tmp_dir / f"part-{ids['held']}-x" / "spill"  # a job's scratch folder
        shared.mkdir(parents=True)
        assert store.recover((lambda: {ids["held"]}) if queue else None) == len(failed)
        status = {r.name: r.status for r in store.catalog.list()[0]}
        assert {name for name in ids if status[name] == "failed"} == failed
        assert shared.exists() is queue  # a live run: the scratch folder is not swept
    finally:
        store.catalog.close()
