"""The catalog's schema is made and changed by the migrations (explorer/store/migrations), on both backends.

Adopting: catalog files written by the code before migrations (tests/store/fixtures, made by
fixtures/make_old_catalogs.py from that code in git history) open, keep every record and reach the newest
revision. What they hold is read independently here, with the sqlite3 module, before the catalog opens them.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import inspect

from explorer.errors import CatalogUnavailable
from explorer.store.catalog import schema as catalog_schema
from explorer.store.catalog.catalog import Catalog
from explorer.store.catalog.db import (
    HEAD_REVISION,
    current_revision,
    head_revision,
    make_engine,
    sqlite_url,
    upgrade,
)
from explorer.store.runs import RunStore
from tests.helpers.catalog_backends import admin, pg_schema
from tests.helpers.support import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OLD_CATALOGS = ["catalog_39a1297.sqlite", "catalog_91e6fa0.sqlite"]  # the first catalog; the last before Alembic


def read_raw(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the old tables, by plain SQL: the expected contents."""
    db = sqlite3.connect(path)
    try:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr)  # noqa: S608 (fixed names)
                for t in ("runs", "tags", "shares", "leases") if t in names}
    finally:
        db.close()


@pytest.mark.parametrize("name", OLD_CATALOGS)
def test_an_old_catalog_file_is_adopted_with_all_its_records(tmp_path: Path, name: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURES / name, data / "catalog.sqlite")
    raw = read_raw(data / "catalog.sqlite")
    assert "alembic_version" not in raw and raw["runs"]  # made before migrations, with data in it

    store = RunStore(data, catalog_url=sqlite_url(data / "catalog.sqlite"))  # the default, said even under the switch
    records, total = store.catalog.list(limit=1000)
    assert total == len(raw["runs"])
    by_id = {r.id: r for r in records}
    for row in raw["runs"]:
        rec = by_id[str(row[0])]
        assert (rec.name, rec.status, rec.progress, rec.message, rec.created_at, rec.updated_at, rec.sha256,
                rec.source) == row[1:9]
        assert rec.tags == sorted(str(t) for run_id, t in raw["tags"] if run_id == rec.id)
    ready = next(r for r in records if r.status == "ready")
    assert (ready.summary.start_ns, ready.summary.end_ns, ready.summary.slices) == (1_000, 9_000_000_123, 42)
    for token, run_id, created_at, revoked in raw["shares"]:
        share = store.catalog.resolve_share(str(token))
        assert share is not None and (share.run_id, share.created_at, share.revoked) == (run_id, created_at, bool(revoked))
    for run_id, host, pid, beat in raw.get("leases", []):
        lease = store.catalog.lease(str(run_id))
        assert lease is not None and (lease.host, lease.pid, lease.heartbeat_at) == (host, pid, beat)

    # adopted: at the newest revision, with the new indexes, and writable as before
    db = sqlite3.connect(data / "catalog.sqlite")
    assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
    assert {"runs_sha", "runs_created", "tags_tag"} <= indexes
    db.close()
    rec = store.catalog.create("after the upgrade")
    store.catalog.take_lease(rec.id)  # the leases table exists even where the old file had none
    assert store.catalog.lease(rec.id) is not None
    store.catalog.close()


def test_the_migrated_schema_is_the_one_the_queries_use(catalog_url: str) -> None:
    """catalog_schema.py (what the queries are written against) and the migrations agree: same tables,
    columns, nullability, primary keys and indexes."""
    Catalog(catalog_url).close()
    engine = make_engine(catalog_url)
    try:
        found = inspect(engine)
        assert set(found.get_table_names()) == set(catalog_schema.metadata.tables) | {"alembic_version"}
        for table in catalog_schema.metadata.sorted_tables:
            columns = {c["name"]: c["nullable"] for c in found.get_columns(table.name)}
            assert columns == {c.name: c.nullable for c in table.columns}, table.name
            assert found.get_pk_constraint(table.name)["constrained_columns"] == [c.name for c in table.primary_key]
            assert {i["name"] for i in found.get_indexes(table.name)} == {i.name for i in table.indexes}
    finally:
        engine.dispose()


def test_postgresql_at_an_older_revision_asks_for_db_upgrade(tmp_path: Path) -> None:
    """A team server's schema changes by one command: opening an outdated database says which, and
    `trace-explorer db upgrade` (a real process) makes it current."""
    with pg_schema() as url:
        engine = make_engine(url)
        assert upgrade(engine, to="0001") == (None, "0001")
        with engine.connect() as conn:
            assert current_revision(conn) == "0001"
        engine.dispose()
        with pytest.raises(CatalogUnavailable, match=rf"revision 0001, this trace-explorer needs {head_revision()}: run "
                           r"`trace-explorer db upgrade --catalog-url URL`"):
            Catalog(url)
        proc = subprocess.run(cli("db", "upgrade", "--catalog-url", url, "--data-dir", str(tmp_path)),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"upgraded from revision 0001 to {head_revision()}" in proc.stdout
        again = subprocess.run(cli("db", "upgrade", "--catalog-url", url), capture_output=True, text=True, timeout=120)
        assert again.returncode == 0 and f"is at revision {head_revision()}: nothing to do" in again.stdout
        Catalog(url).close()


def test_a_newer_revision_is_refused(catalog_url: str) -> None:
    Catalog(catalog_url).close()
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    engine.dispose()
    with pytest.raises(CatalogUnavailable, match="revision 9999, made by a newer trace-explorer"):
        Catalog(catalog_url)


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql://postgres@127.0.0.1:1/x", "is not answering (opening it)"),
    ("mysql://u@h/db", "scheme 'mysql' is not supported"),
    ("not a url", "is not a URL"),
    ("sqlite://", "needs a file path"),
])
def test_bad_catalog_urls_are_one_line_errors(url: str, message: str) -> None:
    with pytest.raises(CatalogUnavailable, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        Catalog(url)
    assert "\n" not in err.value.message


def test_the_cli_reports_an_unreachable_catalog_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(cli("runs", "--data-dir", str(tmp_path), "--catalog-url",
                              "postgresql://postgres@127.0.0.1:1/x"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "is not answering" in proc.stderr


def test_the_postgresql_server_answers() -> None:
    """The PostgreSQL half of these tests needs the server; this one says plainly when it is missing."""
    with admin() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_catalog_at_0002_gains_run_locations_and_keeps_its_runs(catalog_url: str) -> None:
    """Revision 0003 (runs.location): a run stored before it keeps everything and has no location, which
    readers take as runs/<id>, where data folders kept runs."""
    engine = make_engine(catalog_url)
    upgrade(engine, to="0002")
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO runs (id, name, status, created_at, updated_at, summary) "
                             "VALUES ('rold', 'old', 'ready', 1.0, 2.0, '{}')")
        conn.exec_driver_sql("INSERT INTO tags (run_id, tag) VALUES ('rold', 'nightly')")
    assert upgrade(engine, to="0003") == ("0002", "0003")
    engine.dispose()
    cat = Catalog(catalog_url)
    old = cat.get("rold")
    assert (old.name, old.status, old.tags, old.location) == ("old", "ready", ["nightly"], "")
    cat.close()


def test_the_head_revision_opening_compares_with_is_the_scripts_newest() -> None:
    """Opening a catalog reads its revision without Alembic and compares it with HEAD_REVISION: a new migration
    script must move that constant, or every catalog would be migrated (or refused) at each opening."""
    assert head_revision() == HEAD_REVISION


def test_a_catalog_that_records_two_revisions_is_refused_clearly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = sqlite_url(data / "catalog.sqlite")  # this file, even where the suite runs on PostgreSQL
    RunStore(data, catalog_url=url).catalog.close()
    db = sqlite3.connect(data / "catalog.sqlite")
    with db:
        db.execute("INSERT INTO alembic_version VALUES ('0002')")
    db.close()
    with pytest.raises(CatalogUnavailable, match=r"records several schema revisions \((0003, 0002|0002, 0003)\)"):
        RunStore(data, catalog_url=url)
