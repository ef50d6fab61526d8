"""What a rule has spent since its last decision without reaching one.

A night whose budget runs out mid-decision records no verdict (an inconclusive there would be
the invocation's fault, and three evict); what it spent is added here, so the rule is called
inconclusive once these nights together have spent its evidence budget — even when their runs
are too old to be reused as evidence.

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
    op.add_column("rules", sa.Column("undecided_tokens", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_column("rules", "undecided_tokens")
        return
    import sqlite3

    if sqlite3.sqlite_version_info >= (3, 35):  # in place: no rebuild of `rules`
        op.execute("ALTER TABLE rules DROP COLUMN undecided_tokens")
        return
    # An older SQLite rebuilds the table, and dropping the old one (foreign keys are on and cannot
    # be switched off inside the migration's transaction) cascades to the receipts: keep them aside.
    op.execute("CREATE TEMP TABLE _warden_receipts AS SELECT * FROM receipts")
    with op.batch_alter_table("rules") as batch:
        batch.drop_column("undecided_tokens")
    op.execute("INSERT OR IGNORE INTO receipts SELECT * FROM _warden_receipts")
    op.execute("DROP TABLE _warden_receipts")
