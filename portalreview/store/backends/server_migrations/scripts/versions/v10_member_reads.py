"""Format 10: a clinician's login reads no more than an offline copy for her holds. The
responses it reads are those her units name (a pair's two, a rank set's drafts, the reply of an
EPPC unit's sentence, an edit-a-draft unit's draft), no longer every response to her units'
cases: another clinician's reply to a case she answers too was readable with her own SQL
(``postgres_security.MY_RESPONSES``; the policy on ``sentences`` follows). And the members are
granted again: a clinician keeps USAGE only on the sequences of the tables she saves into, no
longer on every sequence, whose states told how many cases, drafts, units and assignments the
whole study holds (``postgres_security._clinician_grants``). Nothing changes in the rows; a
project file's format 10 is the same as its format 9 (``migrations._v9_to_v10``)."""

from alembic import op

from portalreview.store.backends.postgres_security import MY_RESPONSES, grant_members_again
from portalreview.store.backends.server_migrations.steps import set_format
from portalreview.store.schema_sql import PG_SEARCH_PATH

revision = "v10"
down_revision = "v9"

# Format 9's: every response to a case of her units.
_CASES_RESPONSES = f"""
    CREATE OR REPLACE FUNCTION portalreview_my_responses() RETURNS SETOF integer
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {PG_SEARCH_PATH} AS $$
        SELECT id FROM responses WHERE case_id IN (SELECT portalreview_my_cases())
    $$
    """


def upgrade() -> None:
    from portalreview.store.models import Base

    bind = op.get_bind()
    bind.exec_driver_sql(MY_RESPONSES)
    grant_members_again(bind, Base.metadata)
    set_format(10)


def downgrade() -> None:
    # (the members keep their narrower grants: they are all that format 9's program uses)
    op.get_bind().exec_driver_sql(_CASES_RESPONSES)
    set_format(9)
