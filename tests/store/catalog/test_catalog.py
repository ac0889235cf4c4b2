"""The catalog's contract, on both backends (the `catalog` fixture is parametrised: sqlite, postgresql)."""

from __future__ import annotations

import os
import socket
import time

import pytest

from explorer.errors import RunNotFound
from explorer.model.summary import RunSummary
from explorer.store.catalog.catalog import Catalog


def test_create_get_update_delete(catalog: Catalog) -> None:
    before = time.time()
    rec = catalog.create("resnet", source="a.json", sha256="ff" * 32)
    assert (rec.name, rec.status, rec.progress, rec.message, rec.source, rec.sha256, rec.tags) == \
        ("resnet", "queued", 0.0, "", "a.json", "ff" * 32, [])
    assert before <= rec.created_at == rec.updated_at <= time.time()
    catalog.update(rec.id, status="ingesting", progress=0.375, message="parsing", ignored_field="x")
    got = catalog.get(rec.id)
    assert (got.status, got.progress, got.message) == ("ingesting", 0.375, "parsing")
    assert got.updated_at >= got.created_at == rec.created_at  # the time survives the column exactly
    catalog.delete(rec.id)
    with pytest.raises(RunNotFound):
        catalog.get(rec.id)


@pytest.mark.parametrize("call", [
    lambda c: c.update("rmissing", name="x"),
    lambda c: c.delete("rmissing"),
    lambda c: c.get("rmissing"),
    lambda c: c.set_tags("rmissing", ["a"]),
    lambda c: c.create_share("rmissing"),
    lambda c: c.take_lease("rmissing"),
], ids=["update", "delete", "get", "set_tags", "create_share", "take_lease"])
def test_a_missing_run_is_run_not_found(catalog: Catalog, call: object) -> None:
    with pytest.raises(RunNotFound):
        call(catalog)  # type: ignore[operator]


def test_summary_round_trips_with_exact_nanoseconds(catalog: Catalog) -> None:
    rec = catalog.create("r")
    span = 2**62 + 7  # beyond a double's 53-bit mantissa: only exact integer storage keeps the 7
    catalog.update(rec.id, summary={"start_ns": 3, "end_ns": span + 3, "span_ns": span, "slices": 5})
    got = catalog.get(rec.id).summary
    assert isinstance(got, RunSummary)
    assert (got.start_ns, got.end_ns, got.span_ns, got.slices) == (3, span + 3, span, 5)


def test_list_filters_orders_and_pages(catalog: Catalog) -> None:
    names = ["alpha 100%", "alpha_1", "alphaX1", "Beta", "gamma"]
    made = []
    for n in names:
        made.append(catalog.create(n))
        time.sleep(0.002)  # distinct created_at: the order is newest first
    catalog.set_tags(made[0].id, ["nightly"])
    catalog.set_tags(made[3].id, ["nightly", "a100"])
    catalog.update(made[4].id, status="ready")
    records, total = catalog.list()
    assert total == 5 and [r.name for r in records] == names[::-1]
    assert [r.name for r in catalog.list(name="100%")[0]] == ["alpha 100%"]  # % is literal
    assert [r.name for r in catalog.list(name="a_1")[0]] == ["alpha_1"]  # _ is literal, not "any character"
    assert [r.name for r in catalog.list(name="BETA")[0]] == ["Beta"]  # case-insensitive on both backends
    assert {r.name for r in catalog.list(tag="nightly")[0]} == {"alpha 100%", "Beta"}
    assert [r.name for r in catalog.list(status="ready")[0]] == ["gamma"]
    page, total = catalog.list(limit=2, offset=1)
    assert total == 5 and [r.name for r in page] == ["Beta", "alphaX1"]
    assert [(r.name, r.tags) for r in catalog.list(tag="a100")[0]] == [("Beta", ["a100", "nightly"])]


def test_set_tags_replaces_and_dedupes(catalog: Catalog) -> None:
    rec = catalog.create("r")
    catalog.set_tags(rec.id, ["b", "a", "b"])
    assert catalog.get(rec.id).tags == ["a", "b"]
    catalog.set_tags(rec.id, ["c"])
    assert catalog.get(rec.id).tags == ["c"]
    catalog.set_tags(rec.id, [])
    assert catalog.get(rec.id).tags == []


def test_find_by_sha_skips_failed_and_takes_the_oldest(catalog: Catalog) -> None:
    failed = catalog.create("f", sha256="s1")
    catalog.update(failed.id, status="failed")
    first = catalog.create("one", sha256="s1")
    time.sleep(0.002)
    catalog.create("two", sha256="s1")
    found = catalog.find_by_sha("s1")
    assert found is not None and found.id == first.id
    assert catalog.find_by_sha("nothing") is None


def test_unfinished_are_queued_and_ingesting(catalog: Catalog) -> None:
    ids = {s: catalog.create(s).id for s in ("queued", "ingesting", "ready", "failed")}
    for status, run_id in ids.items():
        catalog.update(run_id, status=status)
    assert {r.id for r in catalog.unfinished()} == {ids["queued"], ids["ingesting"]}


def test_shares_create_resolve_revoke(catalog: Catalog) -> None:
    rec = catalog.create("r")
    one, two = catalog.create_share(rec.id), catalog.create_share(rec.id)
    assert one.token != two.token and len(one.token) >= 24
    resolved = catalog.resolve_share(one.token)
    assert resolved is not None and (resolved.run_id, resolved.revoked) == (rec.id, False)
    assert resolved.created_at == one.created_at
    assert catalog.revoke_share(rec.id, one.token) is True
    assert catalog.revoke_share("rother", two.token) is False  # a token revokes only through its own run
    assert [(s.token, s.revoked) for s in catalog.shares(rec.id)] == [(one.token, True), (two.token, False)]
    assert catalog.resolve_share("no-such-token") is None


def test_lease_take_renew_drop(catalog: Catalog) -> None:
    rec = catalog.create("r")
    assert catalog.lease(rec.id) is None and catalog.renew_lease(rec.id) is False
    catalog.take_lease(rec.id)
    lease = catalog.lease(rec.id)
    assert lease is not None and (lease.host, lease.pid) == (socket.gethostname(), os.getpid()) and lease.alive()
    time.sleep(0.01)
    assert catalog.renew_lease(rec.id) is True
    renewed = catalog.lease(rec.id)
    assert renewed is not None and renewed.heartbeat_at > lease.heartbeat_at
    assert not renewed.alive(now=renewed.heartbeat_at + 31)  # LEASE_S without a beat: dead
    catalog.take_lease(rec.id)  # taking again replaces, it does not fail on the primary key
    catalog.drop_lease(rec.id)
    assert catalog.lease(rec.id) is None


def test_delete_cascades_to_tags_shares_and_leases(catalog: Catalog) -> None:
    rec = catalog.create("r")
    catalog.set_tags(rec.id, ["t"])
    share = catalog.create_share(rec.id)
    catalog.take_lease(rec.id)
    catalog.delete(rec.id)
    assert catalog.resolve_share(share.token) is None and catalog.lease(rec.id) is None
    assert catalog.list(tag="t") == ([], 0)


def test_two_catalog_objects_on_one_database_see_each_other(catalog_url: str) -> None:
    """Two processes (here: two engines) on one catalog: what one writes the other reads at once."""
    a, b = Catalog(catalog_url), Catalog(catalog_url)
    try:
        rec = a.create("shared")
        b.set_tags(rec.id, ["x"])
        assert a.get(rec.id).tags == ["x"] and b.get(rec.id).name == "shared"
    finally:
        a.close()
        b.close()


def test_a_connection_held_while_the_catalog_closes_is_closed_when_it_comes_back(catalog: Catalog) -> None:
    """A thread (an index warm-up) still inside a catalog call as the store closes: its connection is closed
    when it is handed back, not parked in the disposed pool and left open (psycopg warns of that at exit)."""
    catalog.create("run")
    with catalog._engine.connect() as conn:  # what a catalog call holds while it runs
        raw = conn.connection.dbapi_connection
        catalog.close()
    assert raw is not None
    with pytest.raises(Exception, match="(?i)closed"):
        raw.cursor().execute("SELECT 1")
