"""Alembic's environment for the catalog: always run programmatically (explorer/store/catalog/db.py hands
over an open connection in `config.attributes`), never from an alembic.ini, so there is no URL here."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
# batch mode: SQLite alters a table by copying it, which later migrations that change columns will need
context.configure(connection=connection, render_as_batch=True, transaction_per_migration=False)
with context.begin_transaction():
    context.run_migrations()
