"""An index for "the agent's runs before this one, newest first" (the distillation trigger).

The trigger prices every ingested run against the agent's last 50 completed runs before it. With
only the one-column agent index, each such query sorted all of the agent's runs: a first collect
or a distill sweep over a long history went quadratic (minutes at 10k runs of one agent). The
new index replaces the one-column one.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_session_runs_agent_started", "session_runs", ["agent", "started_at", "id"])
    # its leading column serves every lookup by agent: the one-column index is dead weight
    op.drop_index("ix_session_runs_agent", table_name="session_runs")


def downgrade() -> None:
    op.create_index("ix_session_runs_agent", "session_runs", ["agent"])
    op.drop_index("ix_session_runs_agent_started", table_name="session_runs")
