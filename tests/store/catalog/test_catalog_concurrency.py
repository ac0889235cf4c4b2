"""Concurrent writers on one catalog, both backends: threads sharing a Catalog, and separate processes.

Each test is built so that a lost update or a mixed result would show: tag sets that cannot be told apart
when merged, share counts that must add up, a lease held by a process that is then killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from explorer.store.catalog.catalog import Catalog
from explorer.store.runs import RunStore

ROOT = Path(__file__).resolve().parents[3]
THREADS = 8
ROUNDS = 15


def in_threads(work: Callable[[int], None], n: int = THREADS) -> None:
    """Run work(i) for i in range(n) at once; re-raise the first error any of them hit."""
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]


def tag_set(i: int) -> list[str]:
    return [f"w{i}-a", f"w{i}-b", f"w{i}-c"]


def test_concurrent_set_tags_leave_one_writers_set(catalog: Catalog) -> None:
    """Replacing tags is delete-then-insert: two unlocked replacements interleave into a union."""
    rec = catalog.create("r")

    def work(i: int) -> None:
        for _ in range(ROUNDS):
            catalog.set_tags(rec.id, tag_set(i))
            tags = catalog.get(rec.id).tags
            assert tags in [tag_set(j) for j in range(THREADS)], tags

    in_threads(work)
    assert catalog.get(rec.id).tags in [tag_set(j) for j in range(THREADS)]


def test_concurrent_shares_and_renames_lose_nothing(catalog: Catalog) -> None:
    rec = catalog.create("r")

    def work(i: int) -> None:
        for k in range(ROUNDS):
            catalog.create_share(rec.id)
            catalog.update(rec.id, name=f"name {i}.{k}", progress=k / ROUNDS)

    in_threads(work)
    shares = catalog.shares(rec.id)
    assert len(shares) == len({s.token for s in shares}) == THREADS * ROUNDS
    assert catalog.get(rec.id).name in {f"name {i}.{ROUNDS - 1}" for i in range(THREADS)}


def test_concurrent_deletes_and_shares_never_orphan_a_share(catalog: Catalog) -> None:
    """A share is made on a run being deleted at the same moment: it fails cleanly or is cascaded away."""
    runs = [catalog.create(f"r{i}") for i in range(ROUNDS)]

    def work(i: int) -> None:
        for rec in runs:
            try:
                if i % 2:
                    catalog.delete(rec.id)
                else:
                    catalog.create_share(rec.id)
            except Exception as exc:  # RunNotFound only: the other side won
                assert type(exc).__name__ == "RunNotFound", exc

    in_threads(work, 4)
    assert catalog.list()[1] == 0
    assert all(catalog.shares(rec.id) == [] for rec in runs)


WRITER = """
import json, sys
from explorer.store.catalog.catalog import Catalog
url, run_id, me, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cat = Catalog(url)
tokens = []
for k in range(rounds):
    cat.set_tags(run_id, [f"{me}-a", f"{me}-b"])
    tokens.append(cat.create_share(run_id).token)
    cat.update(run_id, name=f"{me} {k}")
print(json.dumps(tokens))
"""


def python(*args: str) -> list[str]:
    return [sys.executable, "-c", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_two_processes_write_one_run(catalog_url: str) -> None:
    cat = Catalog(catalog_url)
    try:
        rec = cat.create("r")
        procs = [subprocess.Popen(python(WRITER, catalog_url, rec.id, me, str(ROUNDS)), stdout=subprocess.PIPE,
                                  text=True, env=env()) for me in ("p1", "p2")]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0]
        made = {t for out in outs for t in json.loads(out)}
        assert {s.token for s in cat.shares(rec.id)} == made and len(made) == 2 * ROUNDS
        final = cat.get(rec.id)
        assert final.tags in (["p1-a", "p1-b"], ["p2-a", "p2-b"])
        assert final.name in (f"p1 {ROUNDS - 1}", f"p2 {ROUNDS - 1}")
    finally:
        cat.close()


HOLDER = """
import sys, time
from explorer.store.catalog.catalog import Catalog
cat = Catalog(sys.argv[1])
cat.take_lease(sys.argv[2])
print("held", flush=True)
time.sleep(120)
"""


def test_a_killed_ingest_loses_its_lease_and_recover_fails_only_its_run(tmp_path: Path, catalog_url: str) -> None:
    """Two ingesting runs, each leased by its own process; one process is killed (kill -9). Another
    process's recover() marks the orphan failed and leaves the live one alone."""
    store = RunStore(tmp_path / "data", catalog_url=catalog_url)
    try:
        live, dead = store.catalog.create("live"), store.catalog.create("dead")
        holders = {}
        for rec in (live, dead):
            store.catalog.update(rec.id, status="ingesting")
            holders[rec.id] = subprocess.Popen(python(HOLDER, catalog_url, rec.id), stdout=subprocess.PIPE,
                                               text=True, env=env())
            assert holders[rec.id].stdout is not None and holders[rec.id].stdout.readline() == "held\n"
        lease = store.catalog.lease(dead.id)
        assert lease is not None and lease.pid == holders[dead.id].pid and lease.alive()
        os.kill(holders[dead.id].pid, signal.SIGKILL)
        holders[dead.id].wait(timeout=30)
        assert not lease.alive()  # same host, pid gone: dead without waiting for LEASE_S
        assert store.recover() == 1
        assert store.catalog.get(dead.id).status == "failed"
        assert f"pid {lease.pid}" in store.catalog.get(dead.id).message
        assert store.catalog.get(live.id).status == "ingesting"
        live_lease = store.catalog.lease(live.id)
        assert live_lease is not None and live_lease.alive()
    finally:
        for proc in holders.values():
            proc.kill()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
        store.catalog.close()


def test_renewing_is_only_for_the_holder(catalog_url: str) -> None:
    """A lease taken over by another process is no longer this one's to renew or drop."""
    cat = Catalog(catalog_url)
    try:
        rec = cat.create("r")
        cat.take_lease(rec.id)
        taker = python("import sys; from explorer.store.catalog.catalog import Catalog; Catalog(sys.argv[1]).take_lease(sys.argv[2])",
                       catalog_url, rec.id)
        subprocess.run(taker, check=True, env=env(), timeout=60)
        time.sleep(0.01)
        assert cat.renew_lease(rec.id) is False
        cat.drop_lease(rec.id)
        lease = cat.lease(rec.id)
        assert lease is not None and lease.pid != os.getpid()
    finally:
        cat.close()
