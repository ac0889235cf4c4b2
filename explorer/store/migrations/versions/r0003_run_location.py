"""Where a run's files are: the storage key its publication recorded (runs/<id> in a folder, runs/<id>/<attempt>
on object storage). Empty for runs stored before: those are at runs/<id>, where the data folder kept them.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("location", sa.Text(), nullable=False, server_default=sa.text("''")))


def downgrade() -> None:
    # a plain DROP COLUMN (SQLite >= 3.35): batch mode would copy and drop the runs table, and the tags and
    # shares that reference it would go with it (ON DELETE CASCADE)
    op.drop_column("runs", "location")
