"""Format 8: what a clinician may do with their own SQL on a server study is closed in two
places (postgres_security). The blinded views become security barriers, so that a condition of
the clinician's own (``message::int = 0``) never runs on a row the view hides and prints it in
an error message; and the audit log gets its guard (``AUDIT_GUARD``): every entry inserted
must follow the newest one, carry the hash the program computes, and, for a clinician, be about
their own answer and units. Nothing changes in the rows; a project file's format 8 is the same
as its format 7 (``migrations._v7_to_v8``)."""

from alembic import op

from portalreview.store.backends.postgres_security import AUDIT_GUARD, BLINDED
from portalreview.store.backends.server_migrations.steps import set_format

revision = "v8"
down_revision = "v7"


def upgrade() -> None:
    for view in BLINDED:
        op.execute(f"ALTER VIEW blinded.{view} SET (security_barrier = true)")
    bind = op.get_bind()
    for statement in AUDIT_GUARD:  # (run as written: PL/pgSQL, not SQLAlchemy's text())
        bind.exec_driver_sql(statement)
    set_format(8)


def downgrade() -> None:
    op.execute("DROP TRIGGER guard_audit_chain ON audit_log")
    op.execute("DROP FUNCTION guard_audit_chain_rule()")
    op.execute(
        "DROP FUNCTION portalreview_audit_hash(text, text, integer, text, integer, integer, "
        "text, text)"
    )
    op.execute("DROP FUNCTION portalreview_json_string(text)")
    for view in BLINDED:
        op.execute(f"ALTER VIEW blinded.{view} RESET (security_barrier)")
    set_format(7)
