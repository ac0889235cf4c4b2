"""Indexes for the run list: newest first (ORDER BY created_at) and the tag filter (tags by tag, where the
primary key only serves lookups by run).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("runs_created", "runs", ["created_at"])
    op.create_index("tags_tag", "tags", ["tag"])


def downgrade() -> None:
    op.drop_index("tags_tag", "tags")
    op.drop_index("runs_created", "runs")
