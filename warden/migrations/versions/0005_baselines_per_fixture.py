"""A baseline belongs to one fixture version.

Baselines were keyed by agent, task, backend and model only, so after a new fixture version
(``python -m warden.bench.fixture --write-manifest``) a task's frozen ``run1`` stayed the old
fixture's while its ``best`` came down to a run on the new one: one row mixing two fixtures. Now
the fixture hash is part of the key and a new fixture version starts fresh baselines.

Existing rows keep the fixture of their frozen first run (of their best run when that run is
gone; '' when both are). A row whose best run is on another fixture than its first run (the
mixing this fixes) keeps its first run as its best: which later runs on that fixture were made
with the active set is not recorded. The other fixture's baseline freezes on its next run.
Downgrading keeps, per agent, task, backend and model, the baseline frozen last.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_OLD_KEY = ["agent", "task_id", "backend", "model"]
_NEW_KEY = [*_OLD_KEY, "fixture_hash"]
_UQ = "uq_baselines_agent"  # the naming convention's name, for the old key and the new alike


def _fixture_of(column: str) -> str:
    return f"(SELECT r.fixture_hash FROM bench_runs r WHERE r.id = baselines.{column})"


def upgrade() -> None:
    # Nothing refers to baselines, so SQLite's rebuild of the table cascades to nothing.
    with op.batch_alter_table("baselines") as batch:
        batch.add_column(sa.Column("fixture_hash", sa.String(length=64), nullable=False, server_default=""))
    op.execute(f"UPDATE baselines SET fixture_hash = COALESCE({_fixture_of('run1_run_id')}, "
               f"{_fixture_of('best_run_id')}, '')")
    op.execute(f"UPDATE baselines SET best_weighted = run1_weighted, best_run_id = run1_run_id "
               f"WHERE run1_run_id IS NOT NULL AND best_run_id IS NOT NULL "
               f"AND {_fixture_of('best_run_id')} <> fixture_hash")
    with op.batch_alter_table("baselines") as batch:
        batch.alter_column("fixture_hash", existing_type=sa.String(length=64), existing_nullable=False,
                           server_default=None)
        batch.drop_constraint(_UQ, type_="unique")
        batch.create_unique_constraint(_UQ, _NEW_KEY)


def downgrade() -> None:
    # One row per old key: the baseline frozen last (the newest fixture's) stays.
    op.execute("DELETE FROM baselines WHERE id NOT IN (SELECT keep FROM (SELECT max(id) AS keep FROM baselines "
               "GROUP BY agent, task_id, backend, model) AS kept)")
    with op.batch_alter_table("baselines") as batch:
        batch.drop_constraint(_UQ, type_="unique")
        batch.drop_column("fixture_hash")
        batch.create_unique_constraint(_UQ, _OLD_KEY)
