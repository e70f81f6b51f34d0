"""Format 6: ``report_cache``, the agreement report's per-analysis results kept between runs
(``reports/report_cache``), the PI's alone. As ``migrations._v5_to_v6`` does for a file."""

import sqlalchemy as sa
from alembic import op

from portalreview.store.backends.server_migrations.steps import secure_new_table, set_format

revision = "v6"
down_revision = "v5"


def upgrade() -> None:
    op.create_table(
        "report_cache",
        sa.Column("settings_key", sa.String, primary_key=True),
        sa.Column("part", sa.String, primary_key=True),
        sa.Column("settings_json", sa.Text, nullable=False),
        sa.Column("audit_id", sa.Integer, nullable=False),
        sa.Column("audit_hash", sa.String, nullable=True),
        sa.Column("state_json", sa.Text, nullable=False),
        sa.Column("result_json", sa.Text, nullable=False),
        sa.Column("computed_at", sa.String, nullable=False),
    )
    secure_new_table("report_cache")
    set_format(6)


def downgrade() -> None:
    op.drop_table("report_cache")
    set_format(5)
