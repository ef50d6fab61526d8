"""Checkpoint ids are never handed out twice (SQLite AUTOINCREMENT).

A session-start pointer names a checkpoint by id ("`warden checkpoints show 69`"). SQLite's plain
rowid reuses the highest id once that row is deleted (forget, prune), so the pointer could print
another project's checkpoint. PostgreSQL's sequences never reuse an id: nothing to do there.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _rebuild_checkpoints(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    # Rebuilding drops the old table, which cascades to the recall index (foreign keys are on
    # and cannot be switched off inside the migration's transaction): keep the index aside.
    op.execute("CREATE TEMP TABLE _warden_checkpoint_terms AS SELECT * FROM checkpoint_terms")
    with op.batch_alter_table("checkpoints", recreate="always",
                              table_kwargs={"sqlite_autoincrement": autoincrement}):
        pass
    op.execute("INSERT OR IGNORE INTO checkpoint_terms SELECT * FROM _warden_checkpoint_terms")
    op.execute("DROP TABLE _warden_checkpoint_terms")


def upgrade() -> None:
    _rebuild_checkpoints(autoincrement=True)


def downgrade() -> None:
    _rebuild_checkpoints(autoincrement=False)
