"""Alembic's entry point for server studies: the connection is given in code
(``server_migrations._config``), and the steps run in its transaction."""

from alembic import context

from portalreview.store.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():
    context.run_migrations()
