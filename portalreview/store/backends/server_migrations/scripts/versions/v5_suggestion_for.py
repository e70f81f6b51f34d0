"""Format 5: ``suggestions.for_annotator_id``, a suggestion made for one clinician (from their
own earlier replies), readable by them and the PI alone. As ``migrations._v4_to_v5`` does for a
file, and the suggestions' member policies again with that condition."""

import sqlalchemy as sa
from alembic import op

from portalreview.store.backends.server_migrations.steps import set_format

revision = "v5"
down_revision = "v4"

_MINE = "unit_id IN (SELECT portalreview_my_units())"
_FOR_ME = " AND (for_annotator_id IS NULL OR for_annotator_id = portalreview_me())"


def _member_policies(rows: str) -> None:
    op.execute("DROP POLICY member_reads ON suggestions")
    op.execute("DROP POLICY member_adds ON suggestions")
    op.execute(f"CREATE POLICY member_reads ON suggestions FOR SELECT USING ({rows})")
    op.execute(f"CREATE POLICY member_adds ON suggestions FOR INSERT WITH CHECK ({rows})")


def upgrade() -> None:
    op.add_column(
        "suggestions",
        sa.Column("for_annotator_id", sa.Integer, sa.ForeignKey("annotators.id"), nullable=True),
    )
    _member_policies(_MINE + _FOR_ME)
    set_format(5)


def downgrade() -> None:
    _member_policies(_MINE)
    op.drop_column("suggestions", "for_annotator_id")
    set_format(4)
