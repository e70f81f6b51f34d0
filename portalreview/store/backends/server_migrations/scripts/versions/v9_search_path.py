"""Format 9: the study's functions search the session's temporary schema last. Made with
``SET search_path = public`` alone, a function searched ``pg_temp`` first, so a clinician who
created a temporary table ``study_members`` naming her login the PI's was the PI to every helper
and rule that runs with the owner's rights (``schema_sql.PG_SEARCH_PATH``). Each function of the
study pinned to ``public`` is pinned to ``public, pg_temp``, as a new study's are. Nothing
changes in the rows; a project file's format 9 is the same as its format 8
(``migrations._v8_to_v9``)."""

from alembic import op
from sqlalchemy import text

from portalreview.store.backends.server_migrations.steps import set_format
from portalreview.store.schema_sql import PG_SEARCH_PATH

revision = "v9"
down_revision = "v8"


def _pin_functions(old: str, new: str) -> None:
    """Set ``search_path = new`` on every function of the study's schema that has ``old``."""
    bind = op.get_bind()
    functions = bind.execute(
        text(
            "SELECT oid::regprocedure::text FROM pg_proc "
            "WHERE pronamespace = 'public'::regnamespace AND :setting = ANY(proconfig) "
            "ORDER BY proname"
        ),
        {"setting": f"search_path={old}"},
    ).scalars()
    for function in list(functions):
        bind.exec_driver_sql(f"ALTER FUNCTION {function} SET search_path = {new}")


def upgrade() -> None:
    _pin_functions("public", PG_SEARCH_PATH)
    set_format(9)


def downgrade() -> None:
    _pin_functions(PG_SEARCH_PATH, "public")
    set_format(8)
