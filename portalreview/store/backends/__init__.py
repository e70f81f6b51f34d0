"""Where a project lives: an SQLite file (``store/project.py``) or a PostgreSQL database
(``backends/postgres.py``). Both offer the same interface (read, write, meta, close...), so the
service layer, the kinds and the screens are written once. :func:`open_project` chooses by the
argument: an address ``postgresql://...`` or a file path.
"""

from __future__ import annotations

import os

from portalreview.store.backends.postgres import ServerProject, is_server_url
from portalreview.store.project import Project

AnyProject = Project | ServerProject


def open_project(target: str | os.PathLike, read_only: bool = False, **file_options) -> AnyProject:
    """Open the study at ``target``: a server address or a project file."""
    if is_server_url(target):
        return ServerProject.open(str(target), read_only=read_only)
    return Project.open(target, read_only=read_only, **file_options)


def create_project(target: str | os.PathLike, name: str | None = None, **options) -> AnyProject:
    """Create a study at ``target``: an empty server database, or a new project file."""
    if is_server_url(target):
        return ServerProject.create(str(target), name=name, **options)
    return Project.create(target, name=name, **options)


__all__ = [
    "AnyProject",
    "Project",
    "ServerProject",
    "create_project",
    "is_server_url",
    "open_project",
]
