"""Format 3: ``fact_checks`` ("no medical facts on either side", seed 004), with the two rules
that keep it apart from listed facts. As ``migrations._v2_to_v3`` does for a file."""

import sqlalchemy as sa
from alembic import op

from portalreview.store.backends.server_migrations.steps import secure_new_table, set_format
from portalreview.store.schema_sql import V3_GUARDS, postgres_guard_statements

revision = "v3"
down_revision = "v2"


def upgrade() -> None:
    op.create_table(
        "fact_checks",
        sa.Column("answer_id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("no_facts", sa.Boolean, nullable=False),
        sa.ForeignKeyConstraint(
            ["answer_id", "kind"],
            ["answers.id", "answers.kind"],
            ondelete="CASCADE",
            name="fk_answer_kind",
        ),
        sa.CheckConstraint("kind = 'facts'", name="answer_of_this_kind"),
    )
    secure_new_table("fact_checks")
    for statement in postgres_guard_statements(V3_GUARDS):
        op.execute(statement)
    set_format(3)


def downgrade() -> None:
    for name, table in (
        ("guard_fact_not_in_a_no_facts_check", "facts"),
        ("guard_no_facts_check_without_facts", "fact_checks"),
    ):
        op.execute(f"DROP TRIGGER {name} ON {table}")
        op.execute(f"DROP FUNCTION {name}_rule()")
    op.drop_table("fact_checks")
    set_format(2)
