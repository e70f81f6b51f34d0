"""Format 8: what a clinician may do with their own SQL on a server study is closed in two
places (postgres_security). The blinded views become security barriers, so that a condition of
the clinician's own (``message::int = 0``) never runs on a row the view hides and prints it in
an error message; and the audit log gets its guard (``AUDIT_GUARD``): every entry inserted
must follow the newest one, carry the hash the program computes, and, for a clinician, be about
their own answer and units, and no two entries may follow the same one (a UNIQUE index on
``prev_hash``). A log that already has such a fork is not upgraded: the step fails, in words,
and nothing changes. Nothing changes in the rows; a project file's format 8 is the same as its
format 7 (``migrations._v7_to_v8``)."""

from alembic import op
from sqlalchemy import text

from portalreview.store.backends.postgres import ServerError
from portalreview.store.backends.postgres_security import (
    AUDIT_GUARD,
    AUDIT_ONE_FOLLOWER,
    BLINDED,
)
from portalreview.store.backends.server_migrations.steps import set_format

revision = "v8"
down_revision = "v7"


def _refuse_a_forked_log() -> None:
    """The UNIQUE index cannot be made on a log where two entries follow one: say so, in words
    (the database's own refusal would name only the index)."""
    forks = (
        op.get_bind()
        .execute(
            text(
                "SELECT string_agg(id::text, ', ' ORDER BY id) FROM audit_log "
                "GROUP BY prev_hash HAVING count(*) > 1 ORDER BY min(id)"
            )
        )
        .scalars()
        .all()
    )
    if forks:
        shown = "; ".join(f"entries {ids}" for ids in forks[:5])
        raise ServerError(
            f"The study's audit log is forked: {len(forks)} time(s) two or more entries follow "
            f"the same entry ({shown}), so `portalreview verify` reports it as tampered with. "
            "It was not upgraded (nothing was changed): restore it from a pg_dump made before the "
            "fork, or ask PortalReview's maintainers, before upgrading."
        )


def upgrade() -> None:
    _refuse_a_forked_log()
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
    op.execute(f"DROP INDEX {AUDIT_ONE_FOLLOWER}")
    for view in BLINDED:
        op.execute(f"ALTER VIEW blinded.{view} RESET (security_barrier)")
    set_format(7)
