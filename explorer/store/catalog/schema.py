"""The catalog's tables as SQLAlchemy Core metadata: what the queries in catalog.py are written against.

The schema itself is made by the migrations (explorer/store/migrations/); tests/store/catalog/test_db_migrations.py
checks that the migrated database has exactly these tables, columns and indexes, so the two cannot drift.
"""

from __future__ import annotations

from sqlalchemy import Column, Double, ForeignKey, Index, Integer, MetaData, Table, Text, text

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("status", Text, nullable=False),  # queued | ingesting | ready | failed
    Column("progress", Double, nullable=False, server_default=text("0")),
    Column("message", Text, nullable=False, server_default=text("''")),
    Column("created_at", Double, nullable=False),  # wall-clock seconds since the epoch, as time.time()
    Column("updated_at", Double, nullable=False),
    Column("sha256", Text, nullable=False, server_default=text("''")),
    Column("source", Text, nullable=False, server_default=text("''")),
    Column("summary", Text, nullable=False, server_default=text("'{}'")),  # RunSummary.stored() as JSON text
    # the storage key of the published run (explorer/store/storage.py); '' for runs/<id>, as before storage
    Column("location", Text, nullable=False, server_default=text("''")),
    Index("runs_sha", "sha256"),
    Index("runs_created", "created_at"),
)

tags = Table(
    "tags", metadata,
    Column("run_id", Text, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("tag", Text, primary_key=True),
    Index("tags_tag", "tag"),
)

# who is ingesting a run right now: a live process renews it (catalog.HEARTBEAT_S)
leases = Table(
    "leases", metadata,
    Column("run_id", Text, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("heartbeat_at", Double, nullable=False),
)

shares = Table(
    "shares", metadata,
    Column("token", Text, primary_key=True),
    Column("run_id", Text, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", Double, nullable=False),
    Column("revoked", Integer, nullable=False, server_default=text("0")),
)
