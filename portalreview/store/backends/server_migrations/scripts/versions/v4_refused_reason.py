"""Format 4: ``suggestions.refused_reason``, why the quality gates refused a model suggestion
(NULL for one that may be offered). As ``migrations._v3_to_v4`` does for a file."""

import sqlalchemy as sa
from alembic import op

from portalreview.store.backends.server_migrations.steps import set_format

revision = "v4"
down_revision = "v3"


def upgrade() -> None:
    op.add_column("suggestions", sa.Column("refused_reason", sa.Text, nullable=True))
    set_format(4)


def downgrade() -> None:
    op.drop_column("suggestions", "refused_reason")
    set_format(3)
