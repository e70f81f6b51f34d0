"""Format 2: ``prompt_templates`` (the local-model prompts a study uses, editable by the PI),
and respond units that name a draft to edit (the units CHECK). As ``migrations._v1_to_v2``
does for a file; written out, so that it stays what it was when later formats change."""

import sqlalchemy as sa
from alembic import op

from portalreview.store.backends.server_migrations.steps import secure_new_table, set_format
from portalreview.store.migrations import _RESPOND_V1, _RESPOND_V2
from portalreview.store.models import _unit_shape_check

revision = "v2"
down_revision = "v1"

_UNITS_V2 = _unit_shape_check()  # the units CHECK has not changed since format 2
_UNITS_V1 = _UNITS_V2.replace(_RESPOND_V2, _RESPOND_V1)


def upgrade() -> None:
    op.create_table(
        "prompt_templates",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("name", sa.String, nullable=False, unique=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.String, nullable=False),
        sa.Column("updated_by", sa.Integer, sa.ForeignKey("annotators.id"), nullable=True),
        sa.CheckConstraint("length(trim(kind)) > 0", name="template_kind_not_blank"),
        sa.CheckConstraint("length(trim(name)) > 0", name="template_name_not_blank"),
        sa.CheckConstraint("length(trim(text)) > 0", name="template_text_not_blank"),
        sa.CheckConstraint("version >= 1", name="template_version_positive"),
    )
    secure_new_table("prompt_templates")
    op.drop_constraint("references_fit_kind", "units", type_="check")
    op.create_check_constraint("references_fit_kind", "units", _UNITS_V2)
    set_format(2)


def downgrade() -> None:
    op.drop_constraint("references_fit_kind", "units", type_="check")
    op.create_check_constraint("references_fit_kind", "units", _UNITS_V1)
    op.drop_table("prompt_templates")
    set_format(1)
