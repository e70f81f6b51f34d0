"""Format 7: ``assignments.is_gold_holder``, an assignment that only holds the PI's gold
answer (no work of theirs). As ``migrations._v6_to_v7`` does for a file: existing rows marked
by ``migrations.HOLDER_SQL`` (a gold answer and no answer of their own, the best the format-6
data allows). The assignments' policies read no column, so they stay as they are."""

import sqlalchemy as sa
from alembic import op

from portalreview.store.backends.server_migrations.steps import set_format
from portalreview.store.migrations import HOLDER_SQL

revision = "v7"
down_revision = "v6"


def upgrade() -> None:
    op.add_column(
        "assignments",
        sa.Column("is_gold_holder", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.execute(f"UPDATE assignments SET is_gold_holder = ({HOLDER_SQL})")
    op.alter_column("assignments", "is_gold_holder", server_default=None)  # as a new study
    set_format(7)


def downgrade() -> None:
    op.drop_column("assignments", "is_gold_holder")
    set_format(6)
