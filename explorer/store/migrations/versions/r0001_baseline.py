"""The catalog as trace-explorer made it before migrations: runs, tags, leases, shares. Every statement is IF
NOT EXISTS, so a catalog.sqlite made by that code (no alembic_version table) is adopted by running this
revision over it, and catalogs older still gain `leases`.

Revision ID: 0001, revises nothing."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("progress", sa.Double, nullable=False, server_default=sa.text("0")),
        sa.Column("message", sa.Text, nullable=False, server_default=sa.text("''")),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False, server_default=sa.text("''")),
        sa.Column("source", sa.Text, nullable=False, server_default=sa.text("''")),
        sa.Column("summary", sa.Text, nullable=False, server_default=sa.text("'{}'")),
        if_not_exists=True,
    )
    op.create_index("runs_sha", "runs", ["sha256"], if_not_exists=True)
    op.create_table(
        "tags",
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("tag", sa.Text, primary_key=True),
        if_not_exists=True,
    )
    op.create_table(
        "leases",
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("heartbeat_at", sa.Double, nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "shares",
        sa.Column("token", sa.Text, primary_key=True),
        sa.Column("run_id", sa.Text, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("revoked", sa.Integer, nullable=False, server_default=sa.text("0")),
        if_not_exists=True,
    )


def downgrade() -> None:
    for table in ("shares", "leases", "tags", "runs"):
        op.drop_table(table)
