"""What the steps of ``scripts/versions/`` share: the format number, and what a new table needs in a
server study besides its columns (SQLite's rowid, row-level security, the members' grants)."""

from __future__ import annotations

from alembic import op
from sqlalchemy import MetaData, Table, text

from portalreview.store.backends.postgres_security import grant_members_again, table_policies
from portalreview.store.dialects import postgres_rowid_statement


def set_format(version: int) -> None:
    op.execute(
        text("UPDATE project_meta SET value = :v WHERE key = 'schema_version'").bindparams(
            v=str(version)
        )
    )


def secure_new_table(name: str) -> None:
    """A table a step created: its rowid, its policies, and the members' privileges on it."""
    bind = op.get_bind()
    table = Table(name, MetaData(), autoload_with=bind)
    op.execute(postgres_rowid_statement(table))
    for statement in table_policies(table):
        op.execute(statement)
    from portalreview.store.models import Base

    grant_members_again(bind, Base.metadata)
