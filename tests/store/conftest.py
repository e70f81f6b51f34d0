"""Fixtures of the store tests."""

from __future__ import annotations

import pytest

from portalreview.store.backends import ServerProject
from tests.conftest import build_small_study


@pytest.fixture
def server_study(postgres_server):
    """A new study on the test PostgreSQL server with the small study in it: (server,
    database name, project, study)."""
    database = postgres_server.new_database()
    project = ServerProject.create(postgres_server.url(database))
    study = build_small_study(project)
    yield postgres_server, database, project, study
    project.close()
