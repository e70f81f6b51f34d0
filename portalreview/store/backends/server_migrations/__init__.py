"""Schema versions of a server study, with Alembic.

A project *file* keeps its home-made upgrade runner (``store/migrations.py``): a file is a
document a clinician carries around and opens with whatever version they have, so its steps run
on open, with no configuration, after a backup beside it; SQLite cannot alter most of a table,
so its steps rebuild tables in ways Alembic's batch mode would do less exactly; and its version
lives in ``PRAGMA user_version``, which old versions of the program read.

A *server* study is a database IT runs, which many apps use at once: it is upgraded on purpose,
once, by IT (``portalreview upgrade ADDRESS``, after a ``pg_dump``), never by a clinician's app
opening it. Alembic records its revision in ``alembic_version`` and runs the steps of
``scripts/versions/`` (``v1`` to ``v{SCHEMA_VERSION}``, one per project format) in one transaction
(PostgreSQL's DDL is transactional: a failed upgrade changes nothing). Each step also sets
``project_meta.schema_version``, which the program reads on open.

Alembic is configured here, in code: the program ships no ``alembic.ini``.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection

from portalreview.store.migrations import SCHEMA_VERSION

HEAD = f"v{SCHEMA_VERSION}"
# Alembic's env.py and steps: files Alembic runs, in a folder that is not a package, so that
# nothing that imports every module of the program (the self-test, the network test) runs them.
SCRIPTS = "scripts"


def _config(connection: Connection):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / SCRIPTS))
    config.attributes["connection"] = connection
    return config


def stamp_head(connection: Connection) -> None:
    """Record that a study just made in the current format is at the newest revision."""
    from alembic import command

    command.stamp(_config(connection), HEAD)


def revision(connection: Connection) -> str | None:
    """The study's Alembic revision (``v4``...), or None if Alembic never managed it."""
    from alembic.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, to: str = HEAD) -> None:
    """Run the steps from the study's revision up to ``to``, in the connection's transaction."""
    from alembic import command

    command.upgrade(_config(connection), to)


def downgrade(connection: Connection, to: str) -> None:
    """Run the steps back down to ``to`` (for the tests, which make an older study this way)."""
    from alembic import command

    command.downgrade(_config(connection), to)
